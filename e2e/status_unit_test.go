package e2e

import (
	"net/netip"
	"testing"
)

// Runs without a cluster: the decoders the legs depend on.
func TestDecodeAgentStatus(t *testing.T) {
	for _, c := range []struct {
		in                string
		p1, p2            bool
		ver               string
		cds               string
		demanded, pending int
		bad               bool
	}{
		{in: `{"node":"w1","phase1":true,"phase2":false,"snapshotVersion":"7"}`, p1: true, ver: "7"},
		{in: `{"nodeName":"w1","phases":{"phase1":false,"phase2":true},"snapshotVersion":12}`, p2: true, ver: "12"},
		{in: `{"node":"w1","phase1":true,"phase2":true,"snapshotVersion":"9","cds":"on-demand","demanded":2,"pending":1}`, p1: true, p2: true, ver: "9",
			cds: "on-demand", demanded: 2, pending: 1},
		{in: `{"node":"w1"}`, bad: true},
		{in: `not json`, bad: true},
	} {
		s, err := decodeAgentStatus([]byte(c.in))
		if c.bad {
			if err == nil {
				t.Errorf("%s: want an error", c.in)
			}
			continue
		}
		if err != nil || s.Phase1 != c.p1 || s.Phase2 != c.p2 || s.SnapshotVersion != c.ver || s.Node != "w1" ||
			s.CDS != c.cds || s.Demanded != c.demanded || s.Pending != c.pending {
			t.Errorf("%s: got %+v, %v", c.in, s, err)
		}
	}
}

func TestParseDial(t *testing.T) {
	out := `{"attempt":1,"ok":true,"reply":{"pod":"b-1","node":"w1","podIP":"10.244.1.5","peer":"172.18.0.3:41000"},"local":"10.244.1.9:5000","ms":1.2}
{"attempt":2,"ok":false,"err":"eof","detail":"EOF","ms":0.8}
{"attempt":3,"ok":false,"err":"refused","ms":0.1}
`
	rs, err := parseDial(out)
	if err != nil || len(rs) != 3 {
		t.Fatalf("parseDial: %v, %d results", err, len(rs))
	}
	if outcome(rs[0]) != "reply" || outcome(rs[1]) != "proxy-closed" || outcome(rs[2]) != "host-refused" {
		t.Fatalf("outcomes %s %s %s", outcome(rs[0]), outcome(rs[1]), outcome(rs[2]))
	}
	if _, err := parseDial("{\"attempt\":1}\ngarbage\n"); err == nil {
		t.Fatal("garbage in dial output must be an error")
	}
}

func TestLastAddr(t *testing.T) {
	for in, want := range map[string]string{"10.96.0.0/16": "10.96.255.255", "10.96.0.0/12": "10.111.255.255", "10.0.0.1/32": "10.0.0.1"} {
		if got := lastAddr(mustPrefix(in)).String(); got != want {
			t.Errorf("lastAddr(%s) = %s, want %s", in, got, want)
		}
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestAgentStatusApplied(t *testing.T) {
	s := &agentStatus{Phase1: true, CDS: "on-demand"}
	for _, c := range []struct {
		k, v string
		want bool
	}{{"phase1", "true", true}, {"phase2", "true", false}, {"phase2", "false", true}, {"cds", "on-demand", true}, {"cds", "proactive", false}, {"other", "x", false}} {
		if got := s.applied(c.k, c.v); got != c.want {
			t.Errorf("applied(%s=%s) = %v, want %v", c.k, c.v, got, c.want)
		}
	}
}

func TestDecodeClusters(t *testing.T) {
	builtin := `{"listeners":[],"clusters":[{"name":"passthrough_original_dst","stat_name":"passthrough_original_dst","type":"ORIGINAL_DST"},
	{"name":"svc:10.96.0.10:53","stat_name":"svc.kube-system.kube-dns.53","type":"EDS","warming":true}]}`
	envoy := `{"configs":[{"@type":"type.googleapis.com/envoy.admin.v3.BootstrapConfigDump","bootstrap":{}},
	{"@type":"type.googleapis.com/envoy.admin.v3.ClustersConfigDump","version_info":"3",
	 "static_clusters":[{"cluster":{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"xds_cluster"}}],
	 "dynamic_active_clusters":[{"version_info":"3","cluster":{"name":"svc:10.96.0.10:53"}}],
	 "dynamic_warming_clusters":[{"version_info":"4","cluster":{"name":"svc:10.96.0.11:80"}}]},
	{"@type":"type.googleapis.com/envoy.admin.v3.ListenersConfigDump","dynamic_listeners":[{"name":"capture~a~b"}]}]}`
	for in, want := range map[string][]string{
		builtin: {"passthrough_original_dst", "svc:10.96.0.10:53"},
		envoy:   {"xds_cluster", "svc:10.96.0.10:53", "svc:10.96.0.11:80"},
	} {
		got, err := decodeClusters([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Errorf("got %v, want %v", got, want)
		}
		for _, n := range want {
			if !got[n] {
				t.Errorf("got %v, want %s in it", got, n)
			}
		}
		if got["capture~a~b"] {
			t.Error("a listener is not a cluster")
		}
	}
	for _, bad := range []string{`not json`, `{"listeners":[]}`} {
		if _, err := decodeClusters([]byte(bad)); err == nil {
			t.Errorf("%s: want an error", bad)
		}
	}
}

func TestParseStats(t *testing.T) {
	st, err := parseStats([]byte("tcp.cap_svc.on_demand_cluster_success: 2\ncluster.svc.a.b.80.upstream_cx_total: 7\n" +
		"cluster.x.upstream_cx_length_ms: P0(nan,1) P25(nan,2)\n\n"))
	if err != nil || st["tcp.cap_svc.on_demand_cluster_success"] != 2 || st["cluster.svc.a.b.80.upstream_cx_total"] != 7 || len(st) != 2 {
		t.Fatalf("parseStats: %v, %v", st, err)
	}
	if _, err := parseStats([]byte("<html>not stats</html>")); err == nil {
		t.Fatal("no counters must be an error")
	}
}
