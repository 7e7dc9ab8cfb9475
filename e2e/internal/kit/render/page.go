// Page: a report's Markdown and HTML templates, rendered to report.md and report.html.

package render

import (
	"bytes"
	_ "embed"
	"fmt"
	htmltemplate "html/template"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	texttemplate "text/template"
)

var (
	//go:embed kit.md.tmpl
	kitMD string
	//go:embed kit.html.tmpl
	kitHTML string
)

// Page is a report's two templates, parsed with the kit's functions and templates.
type Page struct {
	md   *texttemplate.Template
	html *htmltemplate.Template
}

// MustPage parses a report's Markdown and HTML template text with the kit's functions (cell,
// join) and funcs beside them; it panics on a template that does not parse, as
// template.Must (the texts are embedded: a test renders them).
func MustPage(md, html string, funcs map[string]any) *Page {
	all := map[string]any{"cell": Cell, "join": strings.Join}
	maps.Copy(all, funcs)
	return &Page{
		md:   texttemplate.Must(texttemplate.Must(texttemplate.New("report.md").Funcs(all).Parse(kitMD)).Parse(md)),
		html: htmltemplate.Must(htmltemplate.Must(htmltemplate.New("report.html").Funcs(all).Parse(kitHTML)).Parse(html)),
	}
}

// Markdown writes report.md of data.
func (p *Page) Markdown(w io.Writer, data any) error {
	if err := p.md.Execute(w, data); err != nil {
		return fmt.Errorf("render report.md: %w", err)
	}
	return nil
}

// HTML writes report.html of data.
func (p *Page) HTML(w io.Writer, data any) error {
	if err := p.html.Execute(w, data); err != nil {
		return fmt.Errorf("render report.html: %w", err)
	}
	return nil
}

// Bytes renders both pages of data.
func (p *Page) Bytes(data any) (md, html []byte, err error) {
	var a, b bytes.Buffer
	if err := p.Markdown(&a, data); err != nil {
		return nil, nil, err
	}
	if err := p.HTML(&b, data); err != nil {
		return nil, nil, err
	}
	return a.Bytes(), b.Bytes(), nil
}

// WriteFiles renders data and writes dir/report.md and dir/report.html; dir must exist. Both
// are rendered first: a template that fails leaves the files of the last run.
func (p *Page) WriteFiles(dir string, data any) error {
	md, html, err := p.Bytes(data)
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{"report.md": md, "report.html": html} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Cell makes a string safe inside a Markdown table cell: a pipe would end the cell, a newline
// the row.
func Cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
