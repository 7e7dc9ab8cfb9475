package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aether-mesh/svclb/fixtures/manifests"
)

// Config is read from the environment (e2e/soak/run.sh sets it from
// e2e/soak/soak.mk's variables).
type Config struct {
	Enabled    bool
	Kubeconfig string
	Cluster    string
	Artifacts  string
	Proxy      string
	Settings
}

// LoadConfig reads the environment; repo is the repository root.
func LoadConfig(repo string) (Config, error) {
	c := Config{
		Enabled:    os.Getenv("SVCLB_SOAK") == "1",
		Kubeconfig: getenv("SVCLB_KUBECONFIG", filepath.Join(repo, "_output", "kubeconfig")),
		Cluster:    getenv("SVCLB_CLUSTER", "svclb"),
		Artifacts:  getenv("SOAK_ARTIFACTS", filepath.Join(repo, "_artifacts", "soak")),
		Proxy:      getenv("SVCLB_PROXY", manifests.ProxyBuiltin),
		Settings: Settings{
			ScanPorts:    []uint16{80, 443},
			ScanParallel: 256,
		},
	}
	var err error
	dur := func(k, def string) time.Duration {
		d, e := time.ParseDuration(getenv(k, def))
		if e != nil && err == nil {
			err = fmt.Errorf("%s: %w", k, e)
		}
		return d
	}
	num := func(k, def string) float64 {
		f, e := strconv.ParseFloat(getenv(k, def), 64)
		if e != nil && err == nil {
			err = fmt.Errorf("%s: %w", k, e)
		}
		return f
	}
	c.Duration = dur("SOAK_DURATION", "4m")
	c.Gap = dur("SOAK_GAP", "4s")
	c.APIServerHold = dur("SOAK_APISERVER_HOLD", "20s")
	c.ScaleHold = dur("SOAK_SCALE_HOLD", "5s")
	c.NodeHold = dur("SOAK_NODE_HOLD", "20s")
	c.SampleEvery = dur("SOAK_SAMPLE_EVERY", "3s")
	c.Timeout = dur("SOAK_TIMEOUT", "8s")
	c.Rate = num("SOAK_RATE", "5")
	c.Long = int(num("SOAK_LONG", "1"))
	c.ScanHosts = int(num("SOAK_SCAN_HOSTS", "768"))
	c.FirstConnCount = int(num("SOAK_FIRST_CONN", "24"))
	c.Faults, err = parseFaults(getenv("SOAK_FAULTS", "all"), err)
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

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
