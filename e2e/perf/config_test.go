package perf

import "testing"

func TestCreateRateRejected(t *testing.T) {
	for _, v := range []string{"-1", "NaN", "+Inf", "fast"} {
		t.Setenv("SVCLB_PERF_CREATE_RATE", v)
		if _, err := loadConfig(); err == nil {
			t.Errorf("SVCLB_PERF_CREATE_RATE=%s accepted", v)
		}
	}
	t.Setenv("SVCLB_PERF_CREATE_RATE", "15")
	if c, err := loadConfig(); err != nil || c.createRate != 15 {
		t.Errorf("SVCLB_PERF_CREATE_RATE=15: %v, rate %v", err, c.createRate)
	}
}
