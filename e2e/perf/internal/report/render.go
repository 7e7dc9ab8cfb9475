package report

import (
	"bytes"
	_ "embed"
	htmltemplate "html/template"
	"os"
	"path/filepath"
	"strings"
	texttemplate "text/template"

	"github.com/aether-mesh/svclb/e2e/perf/internal/result"
)

var (
	//go:embed report.md.tmpl
	mdText string
	//go:embed report.html.tmpl
	htmlText string

	funcs  = map[string]any{"join": strings.Join, "cell": cell}
	mdTmpl = texttemplate.Must(texttemplate.New("md").Funcs(funcs).Parse(mdText))
	// html/template escapes every label the results carry.
	htmlTmpl = htmltemplate.Must(htmltemplate.New("html").Funcs(funcs).Parse(htmlText))
)

// cell keeps a Markdown table cell on its row.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// Render reads the results in dir and writes dir/report.md and
// dir/report.html.
func Render(dir string) error {
	r, err := result.Read(dir)
	if err != nil {
		return err
	}
	md, html, err := Bytes(Build(r))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), md, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.html"), html, 0o644)
}

// Bytes renders the model as Markdown and HTML.
func Bytes(m Model) (md, html []byte, err error) {
	var a, b bytes.Buffer
	if err := mdTmpl.Execute(&a, m); err != nil {
		return nil, nil, err
	}
	if err := htmlTmpl.Execute(&b, m); err != nil {
		return nil, nil, err
	}
	return a.Bytes(), b.Bytes(), nil
}
