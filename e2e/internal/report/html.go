package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
)

//go:embed report.html.tmpl
var htmlText string

// html/template escapes every string of the model, chart labels included:
// backend and leg names come from the cluster.
var htmlTmpl = template.Must(template.New("report.html").
	Funcs(template.FuncMap{"join": strings.Join}).Parse(htmlText))

// HTML writes report.html: a header with the verdict and the run's facts,
// then one card per leg with its red and green runs side by side.
func (r Report) HTML(w io.Writer) error {
	if err := htmlTmpl.Execute(w, r); err != nil {
		return fmt.Errorf("render report.html: %w", err)
	}
	return nil
}
