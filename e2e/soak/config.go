package soak

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/e2e/internal/kit"
	"github.com/aether-mesh/svclb/fixtures/manifests"
)

// Config is read from the environment (e2e/soak/run.sh sets it from
// e2e/soak/soak.mk's variables).
type Config struct {
	kit.Suite
	EnvoyImage string // SVCLB_ENVOY_IMAGE; empty: fixtures/envoy's
	Settings
}

// LoadConfig reads the environment; repo is the repository root.
func LoadConfig(repo string) (Config, error) {
	var e kit.Env
	c := Config{
		// `make soak` passes the time it started so progress lines count from there.
		Suite:      e.Suite(repo, kit.SuiteVars{On: "SVCLB_SOAK", Artifacts: "SOAK_ARTIFACTS", ArtifactsDir: "_artifacts/soak", Start: "SOAK_START"}),
		EnvoyImage: e.String("SVCLB_ENVOY_IMAGE", ""),
		Settings: Settings{
			ScanPorts:    []uint16{80, 443},
			ScanParallel: 256,
		},
	}
	c.Duration = e.Duration("SOAK_DURATION", 4*time.Minute)
	c.Gap = e.Duration("SOAK_GAP", 4*time.Second)
	c.APIServerHold = e.Duration("SOAK_APISERVER_HOLD", 20*time.Second)
	c.ScaleHold = e.Duration("SOAK_SCALE_HOLD", 5*time.Second)
	c.NodeHold = e.Duration("SOAK_NODE_HOLD", 20*time.Second)
	c.SampleEvery = e.Duration("SOAK_SAMPLE_EVERY", 3*time.Second)
	c.Timeout = e.Duration("SOAK_TIMEOUT", 8*time.Second)
	c.Rate = e.Float("SOAK_RATE", 5)
	c.Long = int(e.Float("SOAK_LONG", 1))
	c.ScanHosts = int(e.Float("SOAK_SCAN_HOSTS", 768))
	c.FirstConnCount = int(e.Float("SOAK_FIRST_CONN", 24))
	var err error
	c.Faults, err = parseFaults(e.String("SOAK_FAULTS", "all"), e.Err())
	if c.Proxy != manifests.ProxyBuiltin && c.Proxy != manifests.ProxyEnvoy {
		return c, fmt.Errorf("SVCLB_PROXY=%q: want %s or %s", c.Proxy, manifests.ProxyBuiltin, manifests.ProxyEnvoy)
	}
	return c, err
}

// parseFaults reads SOAK_FAULTS: "all", "none", or a comma or space
// separated list of fault kinds (kept in AllFaults' order).
func parseFaults(s string, err error) ([]string, error) {
	switch s = strings.TrimSpace(s); s {
	case "all":
		return slices.Clone(AllFaults), err
	case "none", "":
		return nil, err
	}
	want := map[string]bool{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		if !slices.Contains(AllFaults, f) {
			return nil, fmt.Errorf("SOAK_FAULTS: unknown fault %q (want all, none or some of %s)", f, strings.Join(AllFaults, ","))
		}
		want[f] = true
	}
	var out []string
	for _, f := range AllFaults {
		if want[f] {
			out = append(out, f)
		}
	}
	return out, err
}
