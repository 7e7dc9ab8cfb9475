package enroll

import (
	"strings"
	"testing"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// TestValidate: a mistyped cut, guard cut or selector is refused with a message naming it,
// before Enroll touches the cluster; the defaults and each documented value pass.
func TestValidate(t *testing.T) {
	good := Options{Selector: "e2e-framework in (services)", Cut: CutGuard, GuardCut: contract.GuardCutProxy}
	for _, o := range []Options{good,
		{Selector: good.Selector, Cut: CutGuard, GuardCut: contract.GuardCutAll},
		{Selector: good.Selector, Cut: CutGuard},
		{Selector: good.Selector, Cut: CutLabel},
	} {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Selector: good.Selector, Cut: CutGuard, GuardCut: "Proxy"}, `guard cut "Proxy"`},
		{Options{Selector: good.Selector, Cut: CutGuard, GuardCut: "none"}, `guard cut "none"`},
		{Options{Selector: good.Selector, Cut: "guards"}, `cut "guards"`},
		{Options{Selector: "e2e-framework in (", Cut: CutGuard}, "namespace selector"},
	} {
		if err := tc.o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.o, err, tc.want)
		}
	}
}
