package statefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrTooLarge is returned by Read for a file over its bound.
var ErrTooLarge = errors.New("state file over its size bound")

// Read returns the content of the regular file at path, at most max bytes. A missing file
// is an error that satisfies errors.Is(err, fs.ErrNotExist). A symlink, a directory, a FIFO,
// a device or a file over max bytes is an error, and nothing of it is read.
func Read(path string, max int64) ([]byte, error) {
	// O_NONBLOCK: should a FIFO appear between the open and the check, the open must not wait
	// for a writer. It changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("state file %s is a symlink: %w", path, err)
		}
		return nil, fmt.Errorf("open state file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat state file %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("state file %s is not a regular file (%s)", path, st.Mode().Type())
	}
	if st.Size() > max {
		return nil, fmt.Errorf("state file %s has %d bytes, more than %d: %w", path, st.Size(), max, ErrTooLarge)
	}
	// The file may grow after the stat: read one byte past the bound to tell.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read state file %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("state file %s grew past %d bytes while read: %w", path, max, ErrTooLarge)
	}
	return b, nil
}

// MoveAside renames the file at path to path+".corrupt" (replacing an older one) and
// returns the new name.
func MoveAside(path string) (string, error) {
	to := path + ".corrupt"
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("move state file aside: %w", err)
	}
	return to, nil
}

// WriteAtomic replaces the file at path with b (mode 0644, the directory created 0755): a
// temporary file in the same directory, synced, renamed over path, then the directory
// synced so the rename itself survives a crash.
func WriteAtomic(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state file directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("state file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write state file: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("chmod state file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync state file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close state file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace state file: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
