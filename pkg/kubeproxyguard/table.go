package kubeproxyguard

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
)

// TableName is kube-proxy's table (family ip). The guard touches no other.
const TableName = "kube-proxy"

// The verdict maps whose elements belong to one Service port each. The
// cluster-ips set is deliberately absent: its element keeps the
// cluster-ips-check REJECT for an un-intercepted connection to the VIP.
var elementMaps = []string{"service-ips", "no-endpoint-services", "firewall-ips", "service-nodeports", "no-endpoint-nodeports"}

// Object kinds in Status.
const (
	KindElement = "element"
	KindChain   = "chain"
	KindSet     = "set"
)

// element is one verdict-map element that belongs to a Service.
type element struct {
	Map  *nftables.Set
	Elem nftables.SetElement
	Desc string // "service-ips: 10.96.100.100 . tcp . 80 : goto service-…"
}

type chain struct {
	Name  string
	Rules int
}

// objects is what the kube-proxy table holds for one Service.
type objects struct {
	Elements []element
	Chains   []chain
	Sets     []string
}

// needsCut reports whether the Service is still (or again) on kube-proxy's
// packet path: an element, a rule or an affinity set left.
func (o *objects) needsCut() bool {
	if len(o.Elements) > 0 || len(o.Sets) > 0 {
		return true
	}
	for _, c := range o.Chains {
		if c.Rules > 0 {
			return true
		}
	}
	return false
}

// cutOps is the number of operations cutting the Service takes.
func (o *objects) cutOps() int {
	n := len(o.Elements) + len(o.Sets)
	for _, c := range o.Chains {
		if c.Rules > 0 {
			n++
		}
	}
	return n
}

func (o *objects) empty() bool {
	return len(o.Elements) == 0 && len(o.Chains) == 0 && len(o.Sets) == 0
}

// names lists the objects for status and logs.
func (o *objects) names() []ObjectRef {
	var r []ObjectRef
	for _, e := range o.Elements {
		r = append(r, ObjectRef{Kind: KindElement, Name: e.Desc})
	}
	for _, c := range o.Chains {
		r = append(r, ObjectRef{Kind: KindChain, Name: c.Name})
	}
	for _, s := range o.Sets {
		r = append(r, ObjectRef{Kind: KindSet, Name: s})
	}
	return r
}

// table is a read-only view of kube-proxy's table, grouped by Service.
type table struct {
	t        *nftables.Table
	services map[types.NamespacedName]*objects
}

var errNoTable = errors.New("table ip " + TableName + " not found")

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

// readTable reads what the table holds for the Services in want (all
// Services when want is nil). It dumps the rules only of the chains of
// wanted Services.
func readTable(c *nftables.Conn, want map[types.NamespacedName]bool) (*table, error) {
	t, err := c.ListTableOfFamily(TableName, nftables.TableFamilyIPv4)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, errNoTable
		}
		return nil, fmt.Errorf("get table ip %s: %w", TableName, err)
	}
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("list chains: %w", err)
	}
	sets, err := c.GetSets(t)
	if err != nil {
		return nil, fmt.Errorf("list sets of table ip %s: %w", TableName, err)
	}
	tb := &table{t: t, services: map[types.NamespacedName]*objects{}}
	get := func(n types.NamespacedName) *objects {
		if want != nil && !want[n] {
			return nil
		}
		o := tb.services[n]
		if o == nil {
			o = &objects{}
			tb.services[n] = o
		}
		return o
	}

	for _, s := range sets {
		if n, ok := parseSetName(s.Name); ok {
			if o := get(n.Service); o != nil {
				o.Sets = append(o.Sets, s.Name)
			}
			continue
		}
		if !slices.Contains(elementMaps, s.Name) {
			continue
		}
		elems, err := c.GetSetElements(s)
		if err != nil {
			return nil, fmt.Errorf("list elements of map %s: %w", s.Name, err)
		}
		for _, e := range elems {
			svc, desc, ok := elementOwner(s.Name, e)
			if !ok {
				continue
			}
			if o := get(svc); o != nil {
				o.Elements = append(o.Elements, element{Map: s, Elem: e, Desc: desc})
			}
		}
	}

	for _, ch := range chains {
		if ch.Table == nil || ch.Table.Name != TableName {
			continue
		}
		n, ok := parseChainName(ch.Name)
		if !ok {
			continue
		}
		o := get(n.Service)
		if o == nil {
			continue
		}
		rules, err := c.GetRules(t, ch)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // deleted since the chain dump
			}
			return nil, fmt.Errorf("list rules of chain %s: %w", ch.Name, err)
		}
		o.Chains = append(o.Chains, chain{Name: ch.Name, Rules: len(rules)})
	}
	return tb, nil
}

// needingCut lists, sorted, the Services still (or again) on kube-proxy's
// path.
func (tb *table) needingCut() []types.NamespacedName {
	var r []types.NamespacedName
	for svc, o := range tb.services {
		if o.needsCut() {
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
