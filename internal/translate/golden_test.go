package translate_test

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aether-mesh/svclb/internal/testing/golden"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/internal/translate/translatetest"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// renderYAML prints a set as readable YAML, resources sorted by name.
func renderYAML(t testing.TB, s translate.Set) []byte {
	var buf bytes.Buffer
	section := func(title string, names []string, get func(string) proto.Message) {
		slices.Sort(names)
		buf.WriteString(title + ":\n")
		for _, n := range names {
			js, err := protojson.Marshal(get(n))
			if err != nil {
				t.Fatal(err)
			}
			y, err := yaml.JSONToYAML(js)
			if err != nil {
				t.Fatal(err)
			}
			buf.WriteString("- ")
			buf.Write(bytes.ReplaceAll(bytes.TrimSuffix(y, []byte("\n")), []byte("\n"), []byte("\n  ")))
			buf.WriteString("\n")
		}
	}
	keys := func(m any) []string {
		var out []string
		switch m := m.(type) {
		case map[string]*clusterv3.Cluster:
			for k := range m {
				out = append(out, k)
			}
		case map[string]*endpointv3.ClusterLoadAssignment:
			for k := range m {
				out = append(out, k)
			}
		case map[string]*listenerv3.Listener:
			for k := range m {
				out = append(out, k)
			}
		}
		return out
	}
	section("listeners", keys(s.Listeners), func(n string) proto.Message { return s.Listeners[n] })
	section("clusters", keys(s.Clusters), func(n string) proto.Message { return s.Clusters[n] })
	section("endpoints", keys(s.Loads), func(n string) proto.Message { return s.Loads[n] })
	return buf.Bytes()
}

func TestGoldenSnapshot(t *testing.T) {
	s := translatetest.RepresentativeSet(false)
	for _, m := range s.Clusters {
		if err := translate.Validate(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range s.Loads {
		if err := translate.Validate(m); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range s.Listeners {
		if err := translate.Validate(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := translate.CheckReferences(s); err != nil {
		t.Fatal(err)
	}
	got := renderYAML(t, s)
	golden.Check(t, filepath.Join("testdata", "snapshot.golden.yaml"), got)
}
