package report

import (
	_ "embed"
	"io"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
)

var (
	//go:embed report.md.tmpl
	markdownText string
	//go:embed report.html.tmpl
	htmlText string

	page = render.MustPage(markdownText, htmlText, nil)
)

// Markdown writes report.md: the same tables as before the report had a
// model, so that what people paste into notes keeps its shape.
func (r Report) Markdown(w io.Writer) error { return page.Markdown(w, r) }

// HTML writes report.html: a header with the verdict and the run's facts,
// then one card per leg with its red and green runs side by side.
func (r Report) HTML(w io.Writer) error { return page.HTML(w, r) }
