package translate

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/aether-mesh/svclb/pkg/contract"

	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	// The typed configs the listeners carry must resolve so Validate can look inside them.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/type/tracing/v3"
)

// Set is a complete resource set, keyed by resource name.
type Set struct {
	Clusters  map[string]*clusterv3.Cluster
	Loads     map[string]*endpointv3.ClusterLoadAssignment
	Listeners map[string]*listenerv3.Listener
}

type validator interface{ ValidateAll() error }

// Validate runs the protos' ValidateAll on m and, because ValidateAll stops at Any, on every
// typed config nested in it.
func Validate(m validator) error {
	if err := m.ValidateAll(); err != nil {
		return err
	}
	l, ok := m.(*listenerv3.Listener)
	if !ok {
		return nil
	}
	var anys []*anypb.Any
	for _, f := range l.GetListenerFilters() {
		anys = append(anys, f.GetTypedConfig())
	}
	for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
		for _, f := range fc.GetFilters() {
			anys = append(anys, f.GetTypedConfig())
		}
	}
	if mt := l.GetFilterChainMatcher().GetMatcherTree(); mt != nil {
		anys = append(anys, mt.GetInput().GetTypedConfig(), mt.GetCustomMatch().GetTypedConfig())
	}
	for _, a := range anys {
		if a == nil {
			continue
		}
		inner, err := a.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("listener %s: typed config %s: %w", l.Name, a.TypeUrl, err)
		}
		if v, ok := inner.(validator); ok {
			if err := v.ValidateAll(); err != nil {
				return fmt.Errorf("listener %s: %s: %w", l.Name, a.TypeUrl, err)
			}
		}
		if tp, ok := inner.(*tcpproxyv3.TcpProxy); ok {
			for _, al := range tp.GetAccessLog() {
				cfg, err := al.GetTypedConfig().UnmarshalNew()
				if err != nil {
					return fmt.Errorf("listener %s: access log: %w", l.Name, err)
				}
				if v, ok := cfg.(validator); ok {
					if err := v.ValidateAll(); err != nil {
						return fmt.Errorf("listener %s: access log: %w", l.Name, err)
					}
				}
			}
		}
	}
	return nil
}

// CheckReferences is the cross-reference check ValidateAll cannot do: every chain a listener's
// matcher names exists, every cluster a chain names is published (the svc placeholder aside:
// filter state always overrides it, and a svc: cluster named only by filter state need not be
// published: on demand the proxy asks for it), and every EDS cluster has its load assignment.
func CheckReferences(s Set) error {
	clusters := make([]string, 0, len(s.Clusters))
	for n := range s.Clusters {
		clusters = append(clusters, n)
	}
	loads := make([]string, 0, len(s.Loads))
	for n := range s.Loads {
		loads = append(loads, n)
	}
	return CheckChanged(s, clusters, loads)
}

// CheckChanged is CheckReferences for a set that was valid before the named clusters and load
// assignments changed (upserted or deleted): it checks every listener and only those names, so
// a one-Service change at 10k Services costs what it changes.
func CheckChanged(s Set, clusters, loads []string) error {
	var errs []error
	for name, l := range s.Listeners {
		chains := map[string]bool{}
		for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
			if fc == nil {
				continue
			}
			if chains[fc.Name] {
				errs = append(errs, fmt.Errorf("listener %s: duplicate filter chain %q", name, fc.Name))
			}
			chains[fc.Name] = true
			for _, f := range fc.GetFilters() {
				tp := &tcpproxyv3.TcpProxy{}
				if f.GetTypedConfig().MessageIs(tp) {
					if err := f.GetTypedConfig().UnmarshalTo(tp); err != nil {
						errs = append(errs, fmt.Errorf("listener %s: %w", name, err))
						continue
					}
					if c := tp.GetCluster(); c != contract.PlaceholderCluster && s.Clusters[c] == nil {
						errs = append(errs, fmt.Errorf("listener %s chain %s: cluster %q not published", name, fc.Name, c))
					}
				}
			}
		}
		actions, err := matcherActions(l.GetFilterChainMatcher())
		if err != nil {
			errs = append(errs, fmt.Errorf("listener %s: %w", name, err))
		}
		for _, a := range actions {
			if !chains[a] {
				errs = append(errs, fmt.Errorf("listener %s: matcher names chain %q that does not exist", name, a))
			}
		}
		if err := checkRefuses(l); err != nil {
			errs = append(errs, fmt.Errorf("listener %s: %w", name, err))
		}
	}
	for _, name := range clusters {
		c := s.Clusters[name]
		if c.GetType() == clusterv3.Cluster_EDS && s.Loads[name] == nil {
			errs = append(errs, fmt.Errorf("cluster %s: no load assignment", name))
		}
		if c == nil && s.Loads[name] != nil {
			errs = append(errs, fmt.Errorf("load assignment %s: no cluster", name))
		}
	}
	for _, name := range loads {
		if s.Loads[name] != nil && s.Clusters[name] == nil {
			errs = append(errs, fmt.Errorf("load assignment %s: no cluster", name))
		}
	}
	return errors.Join(errs...)
}

// checkRefuses is the node-local invariant: every one of contract.NodeLocalRanges is a range of
// the listener's matcher whose action is cap_refused, and that chain's tcp_proxy goes to the
// blackhole cluster. A listener without it would pass the node's loopback through.
func checkRefuses(l *listenerv3.Listener) error {
	ranges, err := matcherRanges(l.GetFilterChainMatcher())
	if err != nil {
		return err
	}
	for _, p := range contract.NodeLocalRanges() {
		if got := ranges[p]; got != contract.ChainRefused {
			return fmt.Errorf("node-local range %s goes to %q, not %s", p, got, contract.ChainRefused)
		}
	}
	for _, fc := range l.GetFilterChains() {
		if fc.GetName() != contract.ChainRefused {
			continue
		}
		for _, f := range fc.GetFilters() {
			tp := &tcpproxyv3.TcpProxy{}
			if f.GetTypedConfig().MessageIs(tp) && f.GetTypedConfig().UnmarshalTo(tp) == nil && tp.GetCluster() == contract.BlackholeCluster {
				return nil
			}
		}
	}
	return fmt.Errorf("chain %s does not go to cluster %s", contract.ChainRefused, contract.BlackholeCluster)
}

// ListenerRanges maps each range of a listener's filter_chain_matcher to the chain it selects.
func ListenerRanges(l *listenerv3.Listener) (map[netip.Prefix]string, error) {
	return matcherRanges(l.GetFilterChainMatcher())
}

// matcherRanges maps each range of the matcher to its action (the first, should a range repeat).
func matcherRanges(m *matcherv3.Matcher) (map[netip.Prefix]string, error) {
	out := map[netip.Prefix]string{}
	ipm, err := ipMatcher(m)
	if err != nil || ipm == nil {
		return out, err
	}
	for _, rm := range ipm.GetRangeMatchers() {
		sv := &wrapperspb.StringValue{}
		if err := rm.GetOnMatch().GetAction().GetTypedConfig().UnmarshalTo(sv); err != nil {
			return nil, fmt.Errorf("filter_chain_matcher action: %w", err)
		}
		for _, r := range rm.GetRanges() {
			a, err := netip.ParseAddr(r.GetAddressPrefix())
			if err != nil {
				return nil, fmt.Errorf("filter_chain_matcher range %q: %w", r.GetAddressPrefix(), err)
			}
			p := netip.PrefixFrom(a, int(r.GetPrefixLen().GetValue()))
			if _, ok := out[p]; !ok {
				out[p] = sv.Value
			}
		}
	}
	return out, nil
}

func ipMatcher(m *matcherv3.Matcher) (*matcherv3.IPMatcher, error) {
	if m == nil {
		return nil, nil
	}
	cm := m.GetMatcherTree().GetCustomMatch()
	if cm == nil {
		return nil, errors.New("filter_chain_matcher: only a trie custom match is emitted")
	}
	ipm := &matcherv3.IPMatcher{}
	if err := cm.GetTypedConfig().UnmarshalTo(ipm); err != nil {
		return nil, fmt.Errorf("filter_chain_matcher: %w", err)
	}
	return ipm, nil
}

func matcherActions(m *matcherv3.Matcher) ([]string, error) {
	ipm, err := ipMatcher(m)
	if err != nil || ipm == nil {
		return nil, err
	}
	var out []string
	for _, rm := range ipm.GetRangeMatchers() {
		sv := &wrapperspb.StringValue{}
		if err := rm.GetOnMatch().GetAction().GetTypedConfig().UnmarshalTo(sv); err != nil {
			return nil, fmt.Errorf("filter_chain_matcher action: %w", err)
		}
		out = append(out, sv.Value)
	}
	return out, nil
}
