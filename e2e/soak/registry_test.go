package soak

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// TestRegistry: every registered fault has a name of its own, a
// description and windows on a cluster of one control plane and two
// workers, and SOAK_FAULTS=all is the registry in its order.
func TestRegistry(t *testing.T) {
	l := Layout{Nodes: []string{"cp", "w1", "w2"}, Workers: []string{"w1", "w2"}, ControlPlane: "cp"}
	seen := map[string]bool{}
	for _, f := range registry {
		name := f.Name()
		if name == "" || seen[name] {
			t.Errorf("%T: name %q empty or taken", f, name)
		}
		seen[name] = true
		if f.Describe() == "" {
			t.Errorf("%s: no description", name)
		}
		ws := f.Windows(l)
		if len(ws) == 0 {
			t.Errorf("%s: no window", name)
		}
		for _, w := range ws {
			if w.Name == "" || w.Kind != "" {
				t.Errorf("%s: window %+v: want a name and the kind left to the scheduler", name, w)
			}
		}
		if got, ok := faultOf(name); !ok || got != f {
			t.Errorf("faultOf(%q) = %v, %v", name, got, ok)
		}
	}
	if !slices.Equal(AllFaults, faultNames(registry)) {
		t.Errorf("AllFaults %v, registry %v", AllFaults, faultNames(registry))
	}
	if all, _ := parseFaults("all", nil); !slices.Equal(all, AllFaults) {
		t.Errorf("SOAK_FAULTS=all: %v", all)
	}
}

// fakeFault allows every failure and no cut, in words of its own.
type fakeFault struct{}

func (fakeFault) Name() string                                             { return "fake" }
func (fakeFault) Describe() string                                         { return "a fake fault runs" }
func (fakeFault) Windows(Layout) []Window                                  { return one("fake") }
func (fakeFault) Run(_ context.Context, _ *runner, _ *Window, _ int) error { return nil }
func (fakeFault) Fails(*Record, Window, Client, echo.LoadEvent) (bool, string) {
	return true, "the fake fault allows it"
}
func (f fakeFault) Cuts(*Record, Window, Client, echo.LoadEvent) (bool, string) { return nothingCut(f) }

// TestJudgeAsksTheFault: the judge knows a window's rules only from the
// fault registered under its kind, and a window of a kind no fault
// registers allows nothing.
func TestJudgeAsksTheFault(t *testing.T) {
	fail := echo.LoadEvent{Kind: echo.LoadFail, Time: at(91), End: at(91.1), Target: TargetSteady, Err: echo.ErrReset}
	cut := echo.LoadEvent{Kind: echo.LoadLongCut, Time: at(92), End: at(92.1), Target: TargetSteady, Err: echo.ErrReset}
	judge := func() *Verdict {
		r := record()
		r.Windows = append(r.Windows, Window{Name: "fake window", Kind: "fake", Start: at(90), End: at(95)})
		r.Clients[0].Events = append(r.Clients[0].Events, fail, cut)
		return Judge(r)
	}
	v := judge()
	reasons := strings.Join(v.Reasons, "\n")
	if !strings.Contains(reasons, "no failure is allowed while a fake fault runs") || !strings.Contains(reasons, "cut while a fake fault runs") {
		t.Errorf("unregistered kind: reasons %q, want nothing allowed", v.Reasons)
	}
	saved := registry
	registry = append(slices.Clone(registry), fakeFault{})
	defer func() { registry = saved }()
	v = judge()
	i := slices.IndexFunc(v.Failures, func(a Attributed) bool { return a.Window == "fake window" })
	if i < 0 || !v.Failures[i].Allowed || v.Failures[i].Why != "the fake fault allows it" {
		t.Fatalf("failures %+v: want the reset allowed in the fake fault's words", v.Failures)
	}
	if v.Pass || !strings.Contains(strings.Join(v.Reasons, "\n"), "cut while a fake fault runs") {
		t.Errorf("reasons %q: want the cut refused in the fake fault's words", v.Reasons)
	}
}

// TestNoKindOutsideItsFault: a fault's kind is named in its own file
// only. A switch on the kind (as the judge, the scheduler and the figures
// once had) must name the kinds, so none is left: they ask the fault.
func TestNoKindOutsideItsFault(t *testing.T) {
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = f
	}
	// Where each registered fault's type and Kind constant are declared.
	types := map[string]bool{}
	for _, f := range registry {
		types[reflect.TypeOf(f).Name()] = true
	}
	home := map[string]string{} // Kind constant → its file
	faultFile := map[string]bool{}
	for n, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if types[s.Name.Name] {
						faultFile[n] = true
					}
				case *ast.ValueSpec:
					for _, id := range s.Names {
						if g.Tok == token.CONST && strings.HasPrefix(id.Name, "Kind") {
							home[id.Name] = n
						}
					}
				}
			}
		}
	}
	if len(home) < len(registry) {
		t.Fatalf("found the Kind constants %v: want one per registered fault (%d)", home, len(registry))
	}
	for k, n := range home {
		if !faultFile[n] {
			t.Errorf("%s is declared in %s, which declares no registered fault", k, n)
		}
	}
	for n, f := range files {
		ast.Inspect(f, func(x ast.Node) bool {
			switch x := x.(type) {
			case *ast.Ident:
				if h, ok := home[x.Name]; ok && h != n {
					t.Errorf("%s: %s names %s: a rule of that fault outside %s", fset.Position(x.Pos()), n, x.Name, h)
				}
			case *ast.BasicLit:
				if n != "judge.go" || x.Kind != token.STRING {
					return true
				}
				if s, err := strconv.Unquote(x.Value); err == nil && slices.Contains(AllFaults, s) {
					t.Errorf("%s: judge.go spells the kind %q", fset.Position(x.Pos()), s)
				}
			}
			return true
		})
	}
}
