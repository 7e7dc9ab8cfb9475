package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/fixtures/echo"
	"github.com/aether-mesh/svclb/fixtures/guard"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// KindRecreate is TargetRecreate's Service deleted and created again.
const KindRecreate = "recreate"

// serviceRecreate deletes the recreate Service and creates it again under
// another ClusterIP; it ends when Kubernetes is done with it (every
// EndpointSlice is the new Service's, every node's proxy holds the
// backends there), every cluster DNS server answers the new address and
// every client has resolved it last and reached it.
type serviceRecreate struct{}

func (serviceRecreate) Name() string { return KindRecreate }

func (serviceRecreate) Describe() string {
	return "the " + TargetRecreate + " Service is deleted and created again under another ClusterIP"
}

func (serviceRecreate) Windows(Layout) []Window {
	return one("Service " + TargetRecreate + " deleted and recreated")
}

// Settle reads the refusals the recreate made before the next fault.
func (serviceRecreate) Settle(ctx context.Context, r *runner) { r.readRefusals(ctx) }

// Fails: for the recreated Service only, a connection closed before any
// backend answered that an agent logged as a refusal, of any reason: the
// old VIP is no Service any more (no-service), the new one may be asked
// for before the agent knows it, or while no slice is filed under the name
// (no-endpoints, as kube-proxy's REJECT would).
func (serviceRecreate) Fails(r *Record, w Window, _ Client, e echo.LoadEvent) (bool, string) {
	return targetedFails(r, w, e, func(Refusal) (bool, string) { return true, "" })
}

func (f serviceRecreate) Cuts(_ *Record, w Window, _ Client, e echo.LoadEvent) (bool, string) {
	if e.Target == w.Target {
		return true, "its Service was deleted"
	}
	return nothingCut(f)
}

func (serviceRecreate) Run(ctx context.Context, r *runner, w *Window, _ int) error {
	w.Target = TargetRecreate
	old := r.wl.services[TargetRecreate]
	oldAddr := workload.Addr(old, 80)
	w.Addrs = []string{oldAddr}
	ips, err := r.c.FreeServiceIPs(ctx, 2)
	if err != nil {
		return err
	}
	ip := ips[0]
	if ip.String() == old.Spec.ClusterIP {
		ip = ips[1]
	}
	w.Start = time.Now()
	if err := r.c.DeleteService(ctx, Namespace, TargetRecreate, time.Minute); err != nil {
		return err
	}
	w.step("deleted")
	svc := workload.Service(Namespace, TargetRecreate, workload.ServiceOptions{Selector: old.Spec.Selector, Cut: true,
		Mutate: func(s *corev1.Service) { s.Spec.ClusterIP = ip.String() }})
	created, err := r.c.CreateService(ctx, svc, time.Minute)
	if err != nil {
		return err
	}
	r.wl.services[TargetRecreate] = created
	newAddr := workload.Addr(created, 80)
	w.step("created at " + created.Spec.ClusterIP)
	if _, err := guard.WaitCutVIP(ctx, r.c, created, time.Minute); err != nil {
		return err
	}
	w.step("cut off kube-proxy")
	// Kubernetes finishes a recreate too: the old Service's EndpointSlices
	// go (the EndpointSlice controller or the garbage collector deletes
	// them) and the new one's come. The agent, like kube-proxy, files
	// slices by their kubernetes.io/service-name label, so until then it
	// may use the old ones or, should they go first, see none: a refusal
	// then is this fault's.
	if err := r.waitOwnSlices(ctx, created); err != nil {
		return err
	}
	w.step("every EndpointSlice is the new Service's")
	backends, err := r.livePods(ctx, TargetRecreate)
	if err != nil {
		return err
	}
	if err := r.waitHolds(ctx, created, backends); err != nil {
		return err
	}
	w.step("every node's proxy holds the backends at " + created.Spec.ClusterIP)
	// The clients follow the cluster DNS, and every DNS server must have
	// the new address before a client is done with the old one: one
	// CoreDNS replica still answering the old ClusterIP (its informer late,
	// as after the apiserver's outage) sends clients back to it.
	name := TargetRecreate + "." + Namespace + ".svc.cluster.local."
	var last string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ok, why, err := r.dnsAnswers(ctx, name, created.Spec.ClusterIP)
		if err != nil || !ok {
			last = why
			if err != nil {
				last = err.Error()
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the cluster DNS did not move %s to %s: %w (%s)", name, created.Spec.ClusterIP, err, last)
	}
	w.step("every DNS server answers " + created.Spec.ClusterIP)
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for i := range r.wl.clients {
			p := &r.wl.clients[i]
			evs, err := r.clientEvents(ctx, p, w.Start)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if ok, why := reached(evs, TargetRecreate, newAddr, w.Start); !ok {
				last = p.Name + ": " + why
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("clients did not move to %s: %w (%s)", newAddr, err, last)
	}
	w.step("every client reached the new address")
	w.notef("%s → %s", oldAddr, newAddr)
	return nil
}

// waitOwnSlices waits until svc has EndpointSlices and every slice filed
// under its name is controlled by it (by its UID: none is left of an
// earlier Service of the same name).
func (r *runner) waitOwnSlices(ctx context.Context, svc *corev1.Service) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := r.c.CS.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if len(l.Items) == 0 {
			last = "no EndpointSlice yet"
			return false, nil
		}
		for i := range l.Items {
			if !metav1.IsControlledBy(&l.Items[i], svc) {
				last = "EndpointSlice " + l.Items[i].Name + " is not controlled by Service UID " + string(svc.UID)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("EndpointSlices of %s/%s: %w (%s)", svc.Namespace, svc.Name, err, last)
	}
	return nil
}

// dnsAnswers says whether every ready cluster DNS server (the kube-dns
// Service's endpoints, asked one by one from the scan pod) answers name
// with ip alone.
func (r *runner) dnsAnswers(ctx context.Context, name, ip string) (bool, string, error) {
	eps, err := r.c.CS.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"})
	if err != nil {
		return false, "", fmt.Errorf("kube-dns endpoints: %w", err)
	}
	var servers []string
	for _, sl := range eps.Items {
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				servers = append(servers, net.JoinHostPort(a, "53"))
			}
		}
	}
	if len(servers) == 0 {
		return false, "no ready kube-dns endpoint", nil
	}
	pod := r.wl.scan
	for _, srv := range servers {
		out, _, err := r.c.Exec(ctx, pod.Namespace, pod.Name, workload.ClientContainer, "/svclb-echo", "lookup",
			"-name="+name, "-server="+srv, "-count=1", "-timeout=2s")
		if err != nil {
			return false, "", fmt.Errorf("lookup of %s at %s: %w", name, srv, err)
		}
		var res echo.LookupResult
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &res); err != nil {
			return false, "", fmt.Errorf("lookup of %s at %s: %q: %w", name, srv, out, err)
		}
		if !res.OK || len(res.Addrs) != 1 || res.Addrs[0] != ip {
			return false, fmt.Sprintf("%s answers %s with %v (%s)", srv, name, res.Addrs, res.Err), nil
		}
	}
	return true, "", nil
}

// reached says whether a client's events since since show target resolved
// to addr last and a success there after every failure.
func reached(evs []echo.LoadEvent, target, addr string, since time.Time) (bool, string) {
	var resolved, lastFail, lastOK time.Time
	for _, e := range evs {
		if e.Target != target || e.Time.Before(since) {
			continue
		}
		switch {
		case e.Kind == echo.LoadResolve && e.Addr == addr:
			resolved = e.Time
		case e.Kind == echo.LoadResolve:
			// Sent back to another address (a late DNS server): not there yet.
			resolved, lastOK = time.Time{}, time.Time{}
		case e.Kind == echo.LoadFail:
			lastFail = e.Time
		case e.Kind == echo.LoadRecover && e.Addr == addr:
			lastOK = e.Time
		case e.Kind == echo.LoadSecond && e.OK > 0:
			if t := time.Unix(e.Second, 0); t.After(lastOK) {
				lastOK = t
			}
		}
	}
	switch {
	case resolved.IsZero():
		return false, "has not resolved " + target + " to " + addr + " last"
	case !lastOK.After(resolved) || !lastOK.After(lastFail):
		return false, "no success at " + addr + " after its last failure"
	}
	return true, ""
}
