package tcpstat

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Files are the tables Read parses, as a process sees its own netns's.
var Files = []string{"/proc/net/snmp", "/proc/net/netstat"}

// Watched are the counters the report shows, in its order: SYNs the
// listener dropped (its accept queue full, or any other reason), SYNs sent
// again, segments sent again, retransmission timeouts, and connects that
// failed.
var Watched = []string{
	"TcpExt.ListenOverflows", "TcpExt.ListenDrops", "TcpExt.TCPSynRetrans",
	"Tcp.RetransSegs", "TcpExt.TCPTimeouts", "Tcp.AttemptFails",
}

// maxTable bounds what Parse reads: both tables are a few KiB.
const maxTable = 1 << 20

// Counters are one reading, by "Table.Name".
type Counters map[string]int64

// Read parses Files.
func Read() (Counters, error) {
	c := Counters{}
	for _, name := range Files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		err = parseInto(c, io.LimitReader(f, maxTable))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return c, nil
}

// Parse reads one table file: pairs of lines, a header ("Tcp: Name1 Name2")
// and its values ("Tcp: 1 2"), for the Tcp and TcpExt tables; others are
// skipped.
func Parse(r io.Reader) (Counters, error) {
	c := Counters{}
	return c, parseInto(c, r)
}

func parseInto(c Counters, r io.Reader) error {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64<<10), maxTable)
	for s.Scan() {
		header := strings.Fields(s.Text())
		if !s.Scan() {
			return fmt.Errorf("table %v: no line of values", first(header))
		}
		values := strings.Fields(s.Text())
		if len(header) == 0 || len(values) == 0 || header[0] != values[0] {
			return fmt.Errorf("table %q: values of %q", first(header), first(values))
		}
		table := strings.TrimSuffix(header[0], ":")
		if table != "Tcp" && table != "TcpExt" {
			continue
		}
		if len(header) != len(values) {
			return fmt.Errorf("table %s: %d names, %d values", table, len(header)-1, len(values)-1)
		}
		for i := 1; i < len(header); i++ {
			v, err := strconv.ParseInt(values[i], 10, 64)
			if err != nil {
				return fmt.Errorf("table %s: %s: %w", table, header[i], err)
			}
			c[table+"."+header[i]] = v
		}
	}
	return s.Err()
}

func first(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// Delta is after − before for each Watched counter that both readings hold.
func Delta(before, after Counters) Counters {
	d := Counters{}
	for _, k := range Watched {
		b, okB := before[k]
		a, okA := after[k]
		if okA && okB {
			d[k] = a - b
		}
	}
	return d
}
