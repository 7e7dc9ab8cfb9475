package prereq

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// recorder stands in for *testing.T to catch how Missing ends a test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a recorder on its own goroutine (Skip and Fatalf end it).
func run(t *testing.T, fn func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

func TestMissingSkipsUnderUnit(t *testing.T) {
	t.Setenv(UnitEnv, "1")
	r := run(t, func(tb testing.TB) { Missing(tb, "needs %s", "etcd") })
	if r.skipped != "needs etcd" || r.failed != "" {
		t.Errorf("skipped %q, failed %q; want a skip saying %q", r.skipped, r.failed, "needs etcd")
	}
}

func TestMissingFailsOtherwise(t *testing.T) {
	for _, v := range []string{"", "0", "true"} {
		t.Setenv(UnitEnv, v)
		r := run(t, func(tb testing.TB) { Missing(tb, "needs %s", "etcd") })
		if r.skipped != "" || !strings.HasPrefix(r.failed, "needs etcd") || !strings.Contains(r.failed, UnitEnv+"=1") {
			t.Errorf("%s=%q: skipped %q, failed %q; want a failure naming etcd and %s=1", UnitEnv, v, r.skipped, r.failed, UnitEnv)
		}
	}
}

func TestCommand(t *testing.T) {
	t.Setenv(UnitEnv, "1")
	if p := Command(t, "go"); p == "" {
		t.Error("Command(go) returned no path")
	}
	r := run(t, func(tb testing.TB) { Command(tb, "svclb-no-such-program") })
	if !strings.Contains(r.skipped, "svclb-no-such-program") {
		t.Errorf("skip %q does not name the program", r.skipped)
	}
}
