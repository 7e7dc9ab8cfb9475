package prereq

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// UnitEnv is the variable `make unit` sets to 1: missing prerequisites skip.
const UnitEnv = "SVCLB_UNIT"

// Unit reports whether missing prerequisites skip (UnitEnv=1) rather than fail.
func Unit() bool { return os.Getenv(UnitEnv) == "1" }

// Missing ends the test for a missing prerequisite: a skip under UnitEnv=1,
// else a failure that says how to get the prerequisite or skip instead.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Unit() {
		t.Skip(msg)
	}
	t.Fatalf("%s (with %s=1, as `make unit` sets, this test skips instead)", msg, UnitEnv)
}

// Root ends the test unless the process runs as root; why says what needs it.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root: %s", why)
	}
}

// Command returns the path of program on PATH, or ends the test.
func Command(t testing.TB, program string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err != nil {
		Missing(t, "needs %s on PATH: %v", program, err)
	}
	return p
}
