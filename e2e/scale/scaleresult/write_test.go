package scaleresult

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestWrite: each result, written as its test writes it, reads back the same, under its JSON
// field names.
func TestWrite(t *testing.T) {
	for _, c := range []struct {
		file   string
		v      interface{ Write(string) error }
		back   any // a new value of v's type
		fields []string
	}{
		{GrowthFile, sampleGrowth(), new(Growth), []string{`"rss": 52428800`, `"pushSeconds": 0.4`}},
		{HeldFile, sampleHeld(), new(Held), []string{`"p999": 4000000`, `"nodeProxyFDs": 6019`}},
		{OnDemandFile, sampleOnDemand(), new(OnDemand), []string{`"demandedAfter": 110`, `"firstErrors": 1`}},
	} {
		dir := filepath.Join(t.TempDir(), "perf")
		if err := c.v.Write(dir); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, c.back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(c.back, c.v) {
			t.Errorf("%s round trip:\n%+v\nwant\n%+v", c.file, c.back, c.v)
		}
		for _, f := range c.fields {
			if !strings.Contains(string(b), f) {
				t.Errorf("%s lacks %s:\n%s", c.file, f, b)
			}
		}
	}
}
