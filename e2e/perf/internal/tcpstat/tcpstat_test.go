package tcpstat

import (
	"os"
	"strings"
	"testing"
)

func TestParseTheKernelsTables(t *testing.T) {
	for file, want := range map[string][]string{
		"testdata/snmp":    {"Tcp.RetransSegs", "Tcp.AttemptFails", "Tcp.MaxConn"},
		"testdata/netstat": {"TcpExt.ListenOverflows", "TcpExt.ListenDrops", "TcpExt.TCPSynRetrans", "TcpExt.TCPTimeouts"},
	} {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Parse(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, k := range want {
			if _, ok := c[k]; !ok {
				t.Errorf("%s: no %s in %d counters", file, k, len(c))
			}
		}
		for k := range c {
			if !strings.HasPrefix(k, "Tcp.") && !strings.HasPrefix(k, "TcpExt.") {
				t.Errorf("%s: %s is not a TCP counter", file, k)
			}
		}
	}
}

func TestParseRefusesBrokenTables(t *testing.T) {
	for name, text := range map[string]string{
		"no values":         "Tcp: RtoAlgorithm RtoMin\n",
		"fewer values":      "Tcp: RtoAlgorithm RtoMin\nTcp: 1\n",
		"not a number":      "Tcp: RtoAlgorithm RtoMin\nTcp: 1 x\n",
		"pairs out of step": "Tcp: RtoAlgorithm\nUdp: 1\n",
	} {
		if _, err := Parse(strings.NewReader(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Another table's shape is not checked, only skipped.
	c, err := Parse(strings.NewReader("Ip: Forwarding\nIp: 1\nTcp: RetransSegs\nTcp: 7\n"))
	if err != nil || len(c) != 1 || c["Tcp.RetransSegs"] != 7 {
		t.Errorf("got %v, %v: want only Tcp.RetransSegs 7", c, err)
	}
}

func TestDeltaIsTheWatchedCountersBothHold(t *testing.T) {
	before := Counters{"TcpExt.ListenOverflows": 3, "Tcp.RetransSegs": 10, "Tcp.InSegs": 1}
	after := Counters{"TcpExt.ListenOverflows": 5, "Tcp.RetransSegs": 10, "Tcp.InSegs": 9, "TcpExt.ListenDrops": 4}
	d := Delta(before, after)
	if len(d) != 2 || d["TcpExt.ListenOverflows"] != 2 || d["Tcp.RetransSegs"] != 0 {
		t.Errorf("Delta = %v, want ListenOverflows 2, RetransSegs 0 and nothing else", d)
	}
}
