package report

import (
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
	"github.com/aether-mesh/svclb/e2e/scale/scaleresult"
)

var (
	//go:embed report.md.tmpl
	mdText string
	//go:embed report.html.tmpl
	htmlText string

	page = render.MustPage(mdText, htmlText, nil)
)

// Render reads the results in dir and writes dir/report.md and
// dir/report.html. An envtest scale result it cannot read is said in its
// section, and, once the rest is written, in the error it returns.
func Render(dir string) error {
	r, err := result.Read(dir)
	if err != nil {
		return err
	}
	e := scaleresult.Read(dir)
	if err := page.WriteFiles(dir, Build(r, e)); err != nil {
		return err
	}
	if len(e.Unread) == 0 {
		return nil
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(e.Unread)) {
		errs = append(errs, e.Unread[name])
	}
	return fmt.Errorf("report.md and report.html written without what could not be read: %w", errors.Join(errs...))
}
