package report

import (
	_ "embed"
	"fmt"
	"io"
	"strings"
	"text/template"
)

//go:embed report.md.tmpl
var markdownText string

var markdownTmpl = template.Must(template.New("report.md").
	Funcs(template.FuncMap{"cell": cell, "join": strings.Join}).Parse(markdownText))

// Markdown writes report.md: the same tables as before the report had a
// model, so that what people paste into notes keeps its shape.
func (r Report) Markdown(w io.Writer) error {
	if err := markdownTmpl.Execute(w, r); err != nil {
		return fmt.Errorf("render report.md: %w", err)
	}
	return nil
}

// cell makes a string safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
