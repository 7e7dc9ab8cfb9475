package cniplugin

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/aether-mesh/svclb/internal/enroll"
)

// viewAnswer is what the agent's namespace view (enroll.NamespaceView) says of a pod's namespace.
type viewAnswer struct {
	namespace       string
	view            *enroll.NamespaceView // nil: the view could not be used (err)
	err             error
	enrolled, known bool
}

// readView reads the view for namespace; an unusable one is logged unless it is merely missing
// (an agent that publishes none, or has not yet).
func readView(log *slog.Logger, path, namespace string) viewAnswer {
	a := viewAnswer{namespace: namespace}
	a.view, a.err = enroll.ReadNamespaceView(path)
	if a.err != nil {
		if !errors.Is(a.err, fs.ErrNotExist) {
			log.Warn("the agent's namespace view is unusable: the agent decides every pod", "error", a.err)
		}
		return a
	}
	a.enrolled, a.known = a.view.Lookup(namespace)
	return a
}

// notEnrolled: the view says the namespace is not enrolled, so the pod passes through without
// the agent.
func (a viewAnswer) notEnrolled() bool { return a.view != nil && a.known && !a.enrolled }

// detail is what an error of the agent says of the view: why the plugin had to ask.
func (a viewAnswer) detail() string {
	switch {
	case a.view == nil:
		return fmt.Sprintf("; the agent's namespace view could not be used either: %v", a.err)
	case a.enrolled:
		return fmt.Sprintf("; namespace %s is enrolled (namespace view generation %d, selector %q)", a.namespace, a.view.Generation, a.view.Selector)
	default:
		return fmt.Sprintf("; namespace %s is not in the agent's namespace view (generation %d, written %s): newer than the view",
			a.namespace, a.view.Generation, a.view.WrittenAt.Format("2006-01-02T15:04:05Z07:00"))
	}
}

// logAttrs name the view that decided, for the pass-through's log line.
func (a viewAnswer) logAttrs() []any {
	return []any{"decided-by", "namespace view", "generation", a.view.Generation, "selector", a.view.Selector}
}
