package render_test

import (
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/e2e/internal/kit/render"
)

// TestPage: a page uses the kit's "chart" and "table" templates and functions beside its own;
// labels are escaped in the HTML and cells kept on their row in the Markdown.
func TestPage(t *testing.T) {
	p := render.MustPage(`# {{shout .Title}}
{{template "table" .Table}}`, `<h1>{{shout .Title}}</h1>{{template "chart" .Chart}}{{template "table" .Table}}`,
		map[string]any{"shout": strings.ToUpper})
	data := struct {
		Title string
		Chart *render.Chart
		Table render.Table
	}{
		Title: "a<b",
		Chart: &render.Chart{W: 10, H: 20,
			Rects:     []render.Rect{{X: 1, W: 2, H: 3, Color: "#111", Title: "bar <1>", Opacity: 0.5}},
			Lines:     []render.Line{{X2: 5, Color: "#222", Dashed: true}},
			Circles:   []render.Circle{{X: 4, Y: 4, Color: "#333", Title: "dot"}},
			Polylines: []render.Polyline{{Points: "0,0 1,1", Color: "#444", Title: "series", Width: 1.5}},
			Texts:     []render.Text{{X: 1, Y: 2, S: "label", End: true, Muted: true}, {S: "c", Color: "#555"}}},
		Table: render.Table{Caption: "cap", Header: []string{"a", "b"}, Rows: [][]string{{"x|y", "two\nlines"}}},
	}
	md, html, err := p.Bytes(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# A<B\n", "cap:\n\n| a | b |\n|---|---|\n| x\\|y | two lines |\n"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	for _, want := range []string{
		"<h1>A&lt;B</h1>",
		`<rect x="1" y="0" width="2" height="3" fill="#111" fill-opacity="0.5"><title>bar &lt;1&gt;</title></rect>`,
		`<line x1="0" y1="0" x2="5" y2="0" stroke="#222" stroke-dasharray="3,3"/>`,
		`<circle cx="4" cy="4" r="3" fill="#333"><title>dot</title></circle>`,
		`<polyline points="0,0 1,1" fill="none" stroke="#444" stroke-width="1.5"><title>series</title></polyline>`,
		`<text x="1" y="2" text-anchor="end" fill="#57606a">label</text>`,
		`<text x="0" y="0" fill="#555">c</text>`,
		"<table><caption>cap</caption>\n<tr><th>a</th><th>b</th></tr>\n<tr><td>x|y</td><td>two\nlines</td></tr>\n</table>\n",
	} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report.html lacks %q:\n%s", want, html)
		}
	}
	// The shapes come in the order the doc gives: bands under rules, labels last.
	if i, j := strings.Index(string(html), "<rect"), strings.Index(string(html), "<line"); i > j {
		t.Errorf("a rect after a line:\n%s", html)
	}
}

// TestWriteFilesMissingDir: the directory is the caller's; a missing one is an error.
func TestWriteFilesMissingDir(t *testing.T) {
	p := render.MustPage("md", "html", nil)
	if err := p.WriteFiles(t.TempDir()+"/missing", nil); err == nil {
		t.Fatal("WriteFiles into a missing directory: no error")
	}
}
