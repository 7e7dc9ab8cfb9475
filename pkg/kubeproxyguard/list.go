package kubeproxyguard

import (
	"fmt"
	"sort"

	"github.com/google/nftables"
	"k8s.io/apimachinery/pkg/types"
)

// ServiceObjects is a Service's ClusterIP entries in kube-proxy's table.
type ServiceObjects struct {
	Service types.NamespacedName
	Objects []ObjectRef // on kube-proxy's path: what the guard would cut
	Cut     []ObjectRef // cut by the guard, as nft prints them (verdict continue)
}

// List reads kube-proxy's table in the namespace netNS (0: the caller's)
// and returns every Service that has ClusterIP entries in it, on path or
// cut, sorted, without changing anything.
func List(netNS int) ([]ServiceObjects, error) {
	c, err := nftables.New(nftables.WithNetNSFd(netNS))
	if err != nil {
		return nil, fmt.Errorf("nftables connection: %w", err)
	}
	tb, err := readTable(c, nil)
	if err != nil {
		return nil, err
	}
	var r []ServiceObjects
	for svc, o := range tb.services {
		r = append(r, ServiceObjects{Service: svc, Objects: o.names(), Cut: o.cutNames()})
	}
	sort.Slice(r, func(i, j int) bool { return r[i].Service.String() < r[j].Service.String() })
	return r, nil
}
