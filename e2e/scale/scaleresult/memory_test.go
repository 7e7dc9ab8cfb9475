package scaleresult

import "testing"

func TestMiB(t *testing.T) {
	if got := MiB(3 << 19); got != "1.5" {
		t.Errorf("MiB = %s", got)
	}
}
