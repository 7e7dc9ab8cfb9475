// Enrollment: the agent's side of the CNI plugin's socket (package enroll). It decides from
// the informers whether a pod is enrolled, records the pods the plugin set up, and gives the
// syncer their capture listeners with the netns path the plugin reported (no search by IP).

package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/aether-mesh/svclb/internal/capture"
	"github.com/aether-mesh/svclb/internal/enroll"
	"github.com/aether-mesh/svclb/internal/translate"
	"github.com/aether-mesh/svclb/pkg/agentstatus"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// podLookupTimeout bounds how long a decision waits for the pod to reach the informer: the
// kubelet creates the sandbox of a pod it saw on its own watch, so ours is at most moments
// behind.
const podLookupTimeout = 10 * time.Second

// enrollment implements enroll.Handler.
type enrollment struct {
	log        *slog.Logger
	node       string
	pods       cache.Store // every pod on this node
	namespaces cache.Store
	file       string         // where the enrolled pods persist across restarts; empty: nowhere
	changed    func()         // the syncer rebuilds the listeners
	views      *namespaceView // publishes the enrolled namespaces for the plugin; nil: not published
	poll       time.Duration

	enrolledGauge, uncapturedGauge prometheus.Gauge
	requests                       *prometheus.HistogramVec

	mu       sync.Mutex
	selector labels.Selector
	selText  string
	byUID    map[string]enroll.Pod // pods the plugin added, by pod UID
	// nodeAddrs are the node's addresses the capture listeners refuse, as a pod's capture takes
	// them (setNodeAddrs): an enrolled pod's decision names them, and its capture leaves them
	// alone.
	nodeAddrs []netip.Addr
}

// newEnrollment reads pods (this node's) and namespaces from the informers; changed is called
// when the listeners or the status may differ (a pod added or deleted, the selector or a
// namespace changed). viewFile is where the enrolled namespaces are published (publishView);
// empty: nowhere.
func newEnrollment(log *slog.Logger, node string, pods cache.Store, namespaces cache.SharedIndexInformer, file, viewFile string,
	reg prometheus.Registerer, changed func()) (*enrollment, error) {
	e := &enrollment{
		log: log, node: node, pods: pods, namespaces: namespaces.GetStore(), file: file, changed: changed, poll: 50 * time.Millisecond,
		enrolledGauge:   prometheus.NewGauge(prometheus.GaugeOpts{Name: contract.MetricEnrolledPods, Help: "Pods on this node captured through the CNI plugin."}),
		uncapturedGauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: contract.MetricEnrolledUncaptured, Help: "Running pods on this node the namespace selector enrolls but the CNI plugin never set up (started before it was installed)."}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    contract.MetricCNIRequestDuration,
			Help:    "The agent's part of a CNI plugin request: the decision and, for an ADD of an enrolled pod, until its capture listener listens.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 1.5, 30), // 0.5 ms .. ~64 s
		}, []string{"op", "enrolled", "result"}),
		byUID: map[string]enroll.Pod{},
	}
	for _, c := range []prometheus.Collector{e.enrolledGauge, e.uncapturedGauge, e.requests} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("enrollment metrics: %w", err)
		}
	}
	e.views = newNamespaceView(log, viewFile, e.view)
	e.setSelector(defaultSelector())
	// A namespace relabelled changes which running pods are enrolled but uncaptured, and the view.
	nsChanged := func() { e.changed(); e.views.changed() }
	if _, err := namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { nsChanged() }, UpdateFunc: func(any, any) { nsChanged() }, DeleteFunc: func(any) { nsChanged() },
	}); err != nil {
		return nil, fmt.Errorf("namespace event handler: %w", err)
	}
	return e, nil
}

// setSelector sets the namespace selector (settings.go parses it from the ConfigMap).
func (e *enrollment) setSelector(text string, sel labels.Selector) {
	e.mu.Lock()
	moved := text != e.selText
	e.selector, e.selText = sel, text
	e.mu.Unlock()
	if moved && e.changed != nil {
		e.changed()
	}
	if moved {
		e.views.changed()
	}
}

// setNodeAddrs records the node's own addresses, the ones every capture listener refuses
// (syncer.setNodeAddrs), for the decisions of pods enrolled from now on; a pod enrolled before
// keeps the set it was given. An address the capture cannot take (capture.CheckNodeAddr: in a
// node-local range, which the listener refuses by range anyway) is left out.
func (e *enrollment) setNodeAddrs(addrs []netip.Addr) {
	keep := make([]netip.Addr, 0, len(addrs))
	var left []error
	for _, a := range addrs {
		if err := capture.CheckNodeAddr(a); err != nil {
			left = append(left, err)
			continue
		}
		keep = append(keep, a)
	}
	e.mu.Lock()
	changed := !slices.Equal(e.nodeAddrs, keep)
	e.nodeAddrs = keep
	e.mu.Unlock()
	if changed && len(left) > 0 { // once per change of the Node's addresses, not per update
		e.log.Info("node addresses left captured for the CNI plugin's pods", "addresses", keep, "why", errors.Join(left...))
	}
}

// decide is the enrollment rule: never hostNetwork, never a pod labelled out, else its
// namespace's labels against the selector.
func (e *enrollment) decide(pod *corev1.Pod) enroll.Decision {
	switch {
	case pod.Spec.HostNetwork:
		return enroll.Decision{Reason: "hostNetwork"}
	case pod.Labels[contract.MeshLabel] == contract.MeshDisabled:
		return enroll.Decision{Reason: fmt.Sprintf("pod label %s=%s", contract.MeshLabel, contract.MeshDisabled)}
	}
	o, ok, _ := e.namespaces.GetByKey(pod.Namespace)
	ns, _ := o.(*corev1.Namespace)
	if !ok || ns == nil {
		return enroll.Decision{Reason: "namespace " + pod.Namespace + " not known"}
	}
	sel, text := e.currentSelector()
	if !namespaceEnrolled(sel, ns) {
		return enroll.Decision{Reason: fmt.Sprintf("namespace %s does not match %q", ns.Name, text)}
	}
	return enroll.Decision{Enrolled: true, Reason: fmt.Sprintf("namespace %s matches %q", ns.Name, text)}
}

// namespaceEnrolled is decide's rule for a namespace, the one the published view follows.
func namespaceEnrolled(sel labels.Selector, ns *corev1.Namespace) bool {
	return sel.Matches(labels.Set(ns.Labels))
}

func (e *enrollment) currentSelector() (labels.Selector, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.selector, e.selText
}

// view is the enrolled namespaces now, as the plugin reads them (namespaceview.go).
func (e *enrollment) view() *enroll.NamespaceView {
	sel, text := e.currentSelector()
	v := &enroll.NamespaceView{Selector: text, Enrolled: []string{}, NotEnrolled: []string{}}
	for _, o := range e.namespaces.List() {
		ns, ok := o.(*corev1.Namespace)
		if !ok {
			continue
		}
		if namespaceEnrolled(sel, ns) {
			v.Enrolled = append(v.Enrolled, ns.Name)
		} else {
			v.NotEnrolled = append(v.NotEnrolled, ns.Name)
		}
	}
	slices.Sort(v.Enrolled)
	slices.Sort(v.NotEnrolled)
	return v
}

// publishView writes the enrolled namespaces for the plugin, once the informers have synced and
// the ConfigMap's selector is in effect, and again whenever they change, until ctx ends.
func (e *enrollment) publishView(ctx context.Context) { e.views.run(ctx) }

// lookup waits for the pod (and the UID the plugin saw) in the informer.
func (e *enrollment) lookup(ctx context.Context, p enroll.Pod) (*corev1.Pod, error) {
	var pod *corev1.Pod
	ctx, cancel := context.WithTimeout(ctx, podLookupTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, e.poll, true, func(context.Context) (bool, error) {
		o, ok, _ := e.pods.GetByKey(p.Namespace + "/" + p.Name)
		pod, _ = o.(*corev1.Pod)
		return ok && pod != nil && (p.UID == "" || string(pod.UID) == p.UID), nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s (uid %s) is not in the agent's informer of node %s: %w", p, p.UID, e.node, err)
	}
	return pod, nil
}

// Decide implements enroll.Handler.
func (e *enrollment) Decide(ctx context.Context, p enroll.Pod) (enroll.Decision, error) {
	pod, err := e.lookup(ctx, p)
	if err != nil {
		return enroll.Decision{}, err
	}
	d := e.decide(pod)
	if d.Enrolled {
		e.mu.Lock()
		d.NodeAddrs = slices.Clone(e.nodeAddrs)
		e.mu.Unlock()
	}
	return d, nil
}

// Add implements enroll.Handler: check that the netns path names a pod's network namespace
// (not the node's), record the pod, have the syncer publish its listener, wait until the proxy
// bound it in the pod's netns.
func (e *enrollment) Add(ctx context.Context, p enroll.Pod) error {
	if err := enroll.CheckNetns(p.Netns); err != nil {
		return fmt.Errorf("pod %s: %w", p, err)
	}
	if p.UID == "" {
		pod, err := e.lookup(ctx, p)
		if err != nil {
			return err
		}
		p.UID = string(pod.UID)
	}
	e.mu.Lock()
	old, had := e.byUID[p.UID]
	e.byUID[p.UID] = p
	e.mu.Unlock()
	if !had || old != p {
		e.save()
		e.changed()
	}
	e.log.Info("pod enrolled by the CNI plugin", "pod", p.String(), "netns", p.Netns, "ip", p.IP)
	return enroll.WaitListening(ctx, p.Netns, contract.CapturePort, e.poll)
}

// Observe implements enroll.Observer.
func (e *enrollment) Observe(op enroll.Op, enrolled bool, took time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	e.requests.WithLabelValues(string(op), strconv.FormatBool(enrolled), result).Observe(took.Seconds())
}

// Ready implements enroll.Handler.
func (e *enrollment) Ready(ctx context.Context, p enroll.Pod) error {
	return enroll.WaitListening(ctx, p.Netns, contract.CapturePort, e.poll)
}

// Del implements enroll.Handler: by sandbox, so the DEL of a pod's old sandbox does not drop
// its new one; by UID only when the runtime named no sandbox.
func (e *enrollment) Del(_ context.Context, p enroll.Pod) error {
	e.mu.Lock()
	n := len(e.byUID)
	for uid, q := range e.byUID {
		if (p.ContainerID != "" && q.ContainerID == p.ContainerID) || (p.ContainerID == "" && uid == p.UID) {
			delete(e.byUID, uid)
		}
	}
	gone := len(e.byUID) != n
	e.mu.Unlock()
	if gone {
		e.save()
		e.changed()
	}
	return nil
}

// capturedPods are the plugin-enrolled pods whose object is still in the informer; entries
// whose pod is gone are dropped (a DEL the agent missed while down).
func (e *enrollment) capturedPods() []translate.CapturedPod {
	if e == nil {
		return nil
	}
	e.mu.Lock()
	var out []translate.CapturedPod
	dropped := false
	for uid, p := range e.byUID {
		o, ok, _ := e.pods.GetByKey(p.Namespace + "/" + p.Name)
		pod, _ := o.(*corev1.Pod)
		if !ok || pod == nil || string(pod.UID) != uid {
			delete(e.byUID, uid)
			dropped = true
			continue
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, translate.CapturedPod{Namespace: p.Namespace, Name: p.Name, NetnsPath: p.Netns})
	}
	e.mu.Unlock()
	if dropped {
		e.save()
	}
	slices.SortFunc(out, func(a, b translate.CapturedPod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// status lists the enrolled pods and the enrolled-but-uncaptured ones, and sets the gauges.
func (e *enrollment) status() *agentstatus.EnrollmentStatus {
	if e == nil {
		return nil
	}
	view := e.views.status()
	e.mu.Lock()
	st := &agentstatus.EnrollmentStatus{NamespaceSelector: e.selText, Enrolled: []string{}, Uncaptured: []string{}, NamespaceView: view}
	uids := map[string]bool{}
	for uid, p := range e.byUID {
		uids[uid] = true
		st.Enrolled = append(st.Enrolled, p.String())
	}
	e.mu.Unlock()
	for _, o := range e.pods.List() {
		pod, ok := o.(*corev1.Pod)
		if !ok || uids[string(pod.UID)] || pod.Labels[contract.CapturedLabel] == "true" ||
			pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName != e.node {
			continue
		}
		if e.decide(pod).Enrolled {
			st.Uncaptured = append(st.Uncaptured, pod.Namespace+"/"+pod.Name)
		}
	}
	slices.Sort(st.Enrolled)
	slices.Sort(st.Uncaptured)
	e.enrolledGauge.Set(float64(len(st.Enrolled)))
	e.uncapturedGauge.Set(float64(len(st.Uncaptured)))
	return st
}
