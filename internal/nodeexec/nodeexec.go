package nodeexec

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// Path is the PATH a command runs with on the node: a FROM-scratch image sets none, and a
// node's tools live in the usual places (nft and ip in /usr/sbin).
const Path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Usage is the command line.
const Usage = `usage: svclb-nodeexec serve
       svclb-nodeexec exec [--root DIR] -- COMMAND [ARG...]

serve    wait for SIGTERM (the container's process: the pod only has to be there to exec into)
exec     chroot into DIR (default ` + contract.HostRoot + `, the node's /), then run COMMAND there
         with PATH=` + Path + `; its exit status is the command's`

// Main runs one command line; ctx ends serve. It returns the exit status when it does not
// exec (exec replaces the process).
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, Usage)
		return 2
	}
	switch args[0] {
	case "serve":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "svclb-nodeexec serve: no arguments (got %q)\n%s\n", args[1:], Usage)
			return 2
		}
		<-ctx.Done()
		return 0
	case "exec":
		root, cmd, err := ParseExec(args[1:])
		if err != nil {
			fmt.Fprintf(stderr, "svclb-nodeexec exec: %v\n%s\n", err, Usage)
			return 2
		}
		err = Exec(root, cmd)
		fmt.Fprintf(stderr, "svclb-nodeexec exec: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) {
			return 127 // as a shell says of a command it cannot find
		}
		return 126
	default:
		fmt.Fprintf(stderr, "svclb-nodeexec: unknown command %q\n%s\n", args[0], Usage)
		return 2
	}
}

// ParseExec reads exec's arguments: [--root DIR] -- COMMAND [ARG...]. The "--" is required, so
// that a command's own flags are never read as exec's.
func ParseExec(args []string) (root string, cmd []string, err error) {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&root, "root", contract.HostRoot, "the node's root")
	dash := -1
	for i, a := range args {
		if a == "--" {
			dash = i
			break
		}
	}
	if dash < 0 {
		return "", nil, errors.New(`want "--" before the command`)
	}
	if err := fs.Parse(args[:dash]); err != nil {
		return "", nil, err
	}
	if fs.NArg() > 0 {
		return "", nil, fmt.Errorf("unexpected %q before \"--\"", fs.Args())
	}
	cmd = args[dash+1:]
	switch {
	case root == "":
		return "", nil, errors.New("--root is empty")
	case len(cmd) == 0 || cmd[0] == "":
		return "", nil, errors.New(`no command after "--"`)
	}
	return root, cmd, nil
}

// Exec chroots into root, changes to its /, finds cmd[0] on Path there (in the node's tree,
// not the image's) and execs it. It returns only on failure.
func Exec(root string, cmd []string) error {
	if err := syscall.Chroot(root); err != nil {
		return fmt.Errorf("chroot %s: %w", root, err)
	}
	if err := syscall.Chdir("/"); err != nil {
		return fmt.Errorf("chdir / in %s: %w", root, err)
	}
	env := []string{"PATH=" + Path, "HOME=/root", "LANG=C"}
	bin, err := lookPath(cmd[0])
	if err != nil {
		return err
	}
	if err := syscall.Exec(bin, cmd, env); err != nil {
		return fmt.Errorf("exec %s: %w", bin, err)
	}
	return nil
}

// lookPath is exec.LookPath on Path (the process's own PATH may be empty in a scratch image).
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(Path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w on %s", name, exec.ErrNotFound, Path)
}
