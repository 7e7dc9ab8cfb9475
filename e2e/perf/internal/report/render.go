package report

import (
	_ "embed"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
)

var (
	//go:embed report.md.tmpl
	mdText string
	//go:embed report.html.tmpl
	htmlText string

	page = render.MustPage(mdText, htmlText, nil)
)

// Render reads the results in dir and writes dir/report.md and
// dir/report.html.
func Render(dir string) error {
	r, err := result.Read(dir)
	if err != nil {
		return err
	}
	return page.WriteFiles(dir, Build(r))
}
