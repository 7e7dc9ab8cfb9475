package imagepush

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/fixtures/images"
)

// Pusher tags and pushes local images with the docker CLI.
type Pusher struct {
	// Docker is the docker command; empty: docker on PATH.
	Docker string
	// Out gets one line per image.
	Out io.Writer
}

// Pushed is one image in the registry.
type Pushed struct {
	Ref    string // the registry's reference, images.Source.Ref
	Digest string // the manifest digest docker push reported ("sha256:…"), "" when it named none
}

// Push tags each of names' local image (images.Local) as to.Ref(name) and pushes it; optional
// names are skipped, with a line, when the local engine lacks them. It checks that every
// required image is there before it pushes any, and stops at the first push that fails.
func (p *Pusher) Push(ctx context.Context, to images.Source, names, optional []string) ([]Pushed, error) {
	if to.Registry() == "" {
		return nil, errors.New("no registry to push to")
	}
	var missing, push []string
	for _, n := range names {
		if p.has(ctx, images.Local(n)) {
			push = append(push, n)
		} else {
			missing = append(missing, images.Local(n))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("not in the local Docker engine: %s (make images builds them)", strings.Join(missing, ", "))
	}
	for _, n := range optional {
		if p.has(ctx, images.Local(n)) {
			push = append(push, n)
		} else {
			p.say("skip %s: not built", images.Local(n))
		}
	}
	var done []Pushed
	for i, n := range push {
		start := time.Now()
		local, ref := images.Local(n), to.Ref(n)
		p.say("(%d/%d) push %s as %s", i+1, len(push), local, ref)
		if _, err := p.docker(ctx, "tag", local, ref); err != nil {
			return done, fmt.Errorf("tag %s as %s: %w", local, ref, err)
		}
		out, err := p.docker(ctx, "push", ref)
		if err != nil {
			return done, fmt.Errorf("push %s: %w", ref, err)
		}
		d := digest(out)
		p.say("(%d/%d) pushed %s (%s) in %s", i+1, len(push), ref, orNone(d), time.Since(start).Round(100*time.Millisecond))
		done = append(done, Pushed{Ref: ref, Digest: d})
	}
	return done, nil
}

func (p *Pusher) has(ctx context.Context, image string) bool {
	_, err := p.docker(ctx, "image", "inspect", "--format", "{{.Id}}", image)
	return err == nil
}

// docker runs the docker CLI; its error carries the command's last lines of output.
func (p *Pusher) docker(ctx context.Context, args ...string) (string, error) {
	bin := p.Docker
	if bin == "" {
		bin = "docker"
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("docker %s: %w: %s", args[0], err, tail(out.String(), 5))
	}
	return out.String(), nil
}

func (p *Pusher) say(format string, args ...any) {
	if p.Out != nil {
		fmt.Fprintf(p.Out, "[images] "+format+"\n", args...)
	}
}

// digestRe finds docker push's last line: "dev: digest: sha256:… size: 527".
var digestRe = regexp.MustCompile(`digest: (sha256:[0-9a-f]{64})`)

func digest(out string) string {
	if m := digestRe.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return ""
}

func orNone(d string) string {
	if d == "" {
		return "no digest reported"
	}
	return d
}

// tail is s's last n non-empty lines, joined by "; ".
func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return "no output"
	}
	return strings.Join(lines, "; ")
}
