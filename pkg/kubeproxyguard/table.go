package kubeproxyguard

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
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

// KindElement is the kind of every object in Status: the guard cuts map
// elements only.
const KindElement = "element"

// element is one map element that is a Service port's ClusterIP entry
// point, as kube-proxy wrote it or as the guard cut it.
type element struct {
	Map *nftables.Set
	Key []byte
	// Dest is Key taken apart: the ClusterIP, protocol and port it matches.
	Dest mapKey
	// Verdict and Comment are kube-proxy's: read from the element, or, for
	// a cut one, from the guard's comment (Mark).
	Verdict verdict
	Comment string
	Desc    string // kube-proxy's element: "service-ips: 10.96.100.100 . tcp . 80 : goto service-…"
	// Cut: the element is the guard's (verdict continue, comment
	// CutCommentPrefix…); NftDesc is it as nft prints it.
	Cut     bool
	NftDesc string
}

// objects is what the kube-proxy table holds of one Service's ClusterIP
// entry points, one per port (and per ClusterIP), split by whether the
// meshed path takes the port over from kube-proxy (mapKey.leftToKubeProxy):
// only those are the guard's to cut.
type objects struct {
	Elements []element // taken over, on kube-proxy's path: as kube-proxy wrote them
	Cut      []element // taken over, cut by the guard (verdict continue)
	Kept     []element // left to kube-proxy, on its path: the guard never cuts them
	// Stale: left to kube-proxy, but cut, by a guard that cut every
	// protocol and port; put back as kube-proxy wrote them (restoreCuts).
	Stale []element
}

// onPath reports whether kube-proxy still (or again) routes or rejects the
// Service's ClusterIP traffic on a port the meshed path takes over.
func (o *objects) onPath() bool { return len(o.Elements) > 0 }

// cutNames lists the cut elements as nft prints them.
func (o *objects) cutNames() []ObjectRef {
	var r []ObjectRef
	for _, e := range slices.Concat(o.Cut, o.Stale) {
		r = append(r, ObjectRef{Kind: KindElement, Name: e.NftDesc})
	}
	return r
}

// ports lists, sorted, the Service's ports whose entries the guard cuts
// (taken over) and those it leaves to kube-proxy.
func (o *objects) ports() (cut, kept []mapKey) {
	for _, e := range slices.Concat(o.Elements, o.Cut) {
		cut = append(cut, e.Dest)
	}
	for _, e := range slices.Concat(o.Kept, o.Stale) {
		kept = append(kept, e.Dest)
	}
	return sortedPorts(cut), sortedPorts(kept)
}

// names lists the objects for status and logs.
func (o *objects) names() []ObjectRef {
	var r []ObjectRef
	for _, e := range o.Elements {
		r = append(r, ObjectRef{Kind: KindElement, Name: e.Desc})
	}
	return r
}

// portNames names the ports of elements, sorted: "tcp/53", "udp/53".
func portNames(es []element) []string {
	var keys []mapKey
	for _, e := range es {
		keys = append(keys, e.Dest)
	}
	var r []string
	for _, k := range sortedPorts(keys) {
		r = append(r, k.port())
	}
	return r
}

// table is a read-only view of kube-proxy's table: the ClusterIP entry
// points, on path or cut, grouped by Service.
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

// readTable reads the ClusterIP entry points on kube-proxy's path of the
// Services in want (all Services when want is nil), and the guard's cut ones
// of every Service (a Service no longer chosen is put back from them), each
// sorted by whether the meshed path takes its port over (objects). An
// element whose verdict is continue routes nothing (nft_do_chain goes on to
// the next rule, as on no match): never on path; the guard's own are its
// cuts, anyone else's are ignored. A table without the cluster-ips set is an
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
			el, ok := readElement(m, e)
			if !ok {
				continue
			}
			svc, ok := elementOwner(name, el.Verdict, el.Comment)
			if !ok || !el.Cut && want != nil && !want[svc] {
				continue
			}
			if name == serviceIPsMap && !internalVerdict(el.Verdict) {
				// goto external-/firewall-: an external or load-balancer
				// IP's entry, even keyed by an address that is some
				// Service's ClusterIP.
				continue
			}
			cands = append(cands, candidate{svc: svc, el: el})
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
		if !clusterIPs[cd.el.Dest.IP] {
			continue // an external or load-balancer IP: kube-proxy's external path
		}
		o := tb.services[cd.svc]
		if o == nil {
			o = &objects{}
			tb.services[cd.svc] = o
		}
		takenOver := cd.el.Dest.leftToKubeProxy() == ""
		switch {
		case cd.el.Cut && takenOver:
			o.Cut = append(o.Cut, cd.el)
		case cd.el.Cut:
			o.Stale = append(o.Stale, cd.el)
		case takenOver:
			o.Elements = append(o.Elements, cd.el)
		default:
			o.Kept = append(o.Kept, cd.el)
		}
	}
	return tb, nil
}

// readElement reads an element of service-ips or no-endpoint-services:
// kube-proxy's, or the guard's cut with kube-proxy's verdict and comment
// taken from its mark. ok is false for a key not "ipv4_addr . inet_proto .
// inet_service", for a continue element that is not the guard's, and for a
// cut whose original was not kept (its owner is unknown: it stays cut until
// kube-proxy's next full sync).
func readElement(m *nftables.Set, e nftables.SetElement) (element, bool) {
	dest, ok := parseMapKey(e.Key)
	if !ok {
		return element{}, false
	}
	v := decodeVerdict(e.Val)
	if v.Code != int32(expr.VerdictContinue) {
		return element{Map: m, Key: e.Key, Dest: dest, Verdict: v, Comment: e.Comment, Desc: describe(m.Name, e.Key, v, e.Comment)}, true
	}
	mark, ok := parseCutComment(e.Comment)
	if !ok || !mark.restorable() {
		return element{}, false
	}
	return element{
		Map: m, Key: e.Key, Dest: dest, Verdict: mark.Verdict, Comment: mark.Comment,
		Desc: describe(m.Name, e.Key, mark.Verdict, mark.Comment),
		Cut:  true, NftDesc: describe(m.Name, e.Key, v, e.Comment),
	}, true
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

// cutServices lists, sorted, the Services with elements the guard cut.
func (tb *table) cutServices() []types.NamespacedName {
	var r []types.NamespacedName
	for svc, o := range tb.services {
		if len(o.Cut)+len(o.Stale) > 0 {
			r = append(r, svc)
		}
	}
	sortNames(r)
	return r
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
