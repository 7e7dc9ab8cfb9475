package kubeproxyguard

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// TableName is kube-proxy's table (family ip). The guard touches no other.
const TableName = "kube-proxy"

// The verdict maps that hold a Service port's ClusterIP entry points, keyed
// "ClusterIP . proto . port": service-ips (the Service has endpoints usable
// by ClusterIP traffic: goto its service- or local- chain) and
// no-endpoint-services (it has none: reject or drop). kube-proxy keys the
// external IP and load-balancer IP entry points in the same two maps; they
// and every other map (service-nodeports, no-endpoint-nodeports,
// firewall-ips) are kube-proxy's NodePort and external path and stay.
const (
	serviceIPsMap         = "service-ips"
	noEndpointServicesMap = "no-endpoint-services"
)

// clusterIPsSet is kube-proxy's set of every active ClusterIP (and nothing
// else): what tells a ClusterIP key of the two maps from an external or
// load-balancer IP one, without the Service object. The guard only reads
// it; its element keeps kube-proxy's cluster-ips-check REJECT for an
// un-intercepted connection to the VIP.
const clusterIPsSet = "cluster-ips"

// KindElement is the kind of every object in Status: the guard deletes map
// elements only.
const KindElement = "element"

// element is one map element that is a Service port's ClusterIP entry
// point.
type element struct {
	Map  *nftables.Set
	Elem nftables.SetElement
	Desc string // "service-ips: 10.96.100.100 . tcp . 80 : goto service-…"
}

// objects is what the kube-proxy table holds of one Service on the
// ClusterIP path: its entry points, one per port (and per ClusterIP).
type objects struct {
	Elements []element
}

// onPath reports whether kube-proxy still (or again) routes or rejects the
// Service's ClusterIP traffic.
func (o *objects) onPath() bool { return len(o.Elements) > 0 }

// names lists the objects for status and logs.
func (o *objects) names() []ObjectRef {
	var r []ObjectRef
	for _, e := range o.Elements {
		r = append(r, ObjectRef{Kind: KindElement, Name: e.Desc})
	}
	return r
}

// table is a read-only view of kube-proxy's table: the ClusterIP entry
// points, grouped by Service.
type table struct {
	t        *nftables.Table
	services map[types.NamespacedName]*objects
}

var (
	errNoTable      = errors.New("table ip " + TableName + " not found")
	errNoClusterIPs = errors.New("table ip " + TableName + " has no set " + clusterIPsSet + " to tell ClusterIPs from external IPs")
)

// read reads the table for a pass (see readTable); errNoTable is returned
// as is: no table is nothing to guard, not a failure.
func (g *Guard) read(want map[types.NamespacedName]bool) (*table, error) {
	tb, err := readTable(g.conn, want)
	if err != nil && !errors.Is(err, errNoTable) {
		g.metrics.errors.WithLabelValues("read").Inc()
		return nil, fmt.Errorf("read table ip %s: %w", TableName, err)
	}
	return tb, err
}

// readTable reads the ClusterIP entry points of the Services in want (all
// Services when want is nil). A table without the cluster-ips set is an
// error (errNoClusterIPs): without it the guard cannot tell a ClusterIP
// from an external IP, and cuts nothing rather than a Service's external
// path.
func readTable(c *nftables.Conn, want map[types.NamespacedName]bool) (*table, error) {
	t, err := c.ListTableOfFamily(TableName, nftables.TableFamilyIPv4)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, errNoTable
		}
		return nil, fmt.Errorf("get table ip %s: %w", TableName, err)
	}
	sets, err := c.GetSets(t)
	if err != nil {
		return nil, fmt.Errorf("list sets of table ip %s: %w", TableName, err)
	}
	tb := &table{t: t, services: map[types.NamespacedName]*objects{}}
	byName := map[string]*nftables.Set{}
	for _, s := range sets {
		byName[s.Name] = s
	}
	if byName[clusterIPsSet] == nil {
		return nil, errNoClusterIPs
	}

	// The maps are read before cluster-ips: kube-proxy adds a ClusterIP to
	// cluster-ips in the transaction that adds its map elements (or an
	// earlier one), so every ClusterIP element read here has its IP in the
	// set read after. The other order could miss a Service created between
	// the two reads until the next pass.
	type candidate struct {
		svc types.NamespacedName
		ip  netip.Addr
		el  element
	}
	var cands []candidate
	for _, name := range []string{serviceIPsMap, noEndpointServicesMap} {
		m := byName[name]
		if m == nil {
			continue
		}
		elems, err := c.GetSetElements(m)
		if err != nil {
			return nil, fmt.Errorf("list elements of map %s: %w", name, err)
		}
		for _, e := range elems {
			svc, desc, ok := elementOwner(name, e)
			if !ok || want != nil && !want[svc] {
				continue
			}
			if name == serviceIPsMap && !internalVerdict(e) {
				// goto external-/firewall-: an external or load-balancer
				// IP's entry, even keyed by an address that is some
				// Service's ClusterIP.
				continue
			}
			ip, ok := keyIP(e.Key)
			if !ok {
				continue
			}
			cands = append(cands, candidate{svc: svc, ip: ip, el: element{Map: m, Elem: e, Desc: desc}})
		}
	}
	if len(cands) == 0 {
		return tb, nil
	}
	clusterIPs, err := setIPs(c, byName[clusterIPsSet])
	if err != nil {
		return nil, err
	}
	for _, cd := range cands {
		if !clusterIPs[cd.ip] {
			continue // an external or load-balancer IP: kube-proxy's external path
		}
		o := tb.services[cd.svc]
		if o == nil {
			o = &objects{}
			tb.services[cd.svc] = o
		}
		o.Elements = append(o.Elements, cd.el)
	}
	return tb, nil
}

// setIPs reads an ipv4_addr set.
func setIPs(c *nftables.Conn, s *nftables.Set) (map[netip.Addr]bool, error) {
	elems, err := c.GetSetElements(s)
	if err != nil {
		return nil, fmt.Errorf("list elements of set %s: %w", s.Name, err)
	}
	ips := map[netip.Addr]bool{}
	for _, e := range elems {
		if len(e.Key) == 4 {
			ips[netip.AddrFrom4([4]byte(e.Key))] = true
		}
	}
	return ips, nil
}

// onPathServices lists, sorted, the Services kube-proxy still (or again)
// routes by ClusterIP.
func (tb *table) onPathServices() []types.NamespacedName {
	var r []types.NamespacedName
	for svc, o := range tb.services {
		if o.onPath() {
			r = append(r, svc)
		}
	}
	sortNames(r)
	return r
}

// sortNames sorts by namespace/name, the order of transactions, logs and
// listings.
func sortNames(s []types.NamespacedName) {
	sort.Slice(s, func(i, j int) bool { return s[i].String() < s[j].String() })
}
