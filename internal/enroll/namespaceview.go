package enroll

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/aether-mesh/svclb/internal/statefile"
)

// NamespaceViewVersion is the format of NamespaceView; a reader refuses any other.
const NamespaceViewVersion = 1

// MaxNamespaceViewBytes bounds the view: names of at most 63 bytes, about 60000 namespaces.
// The agent does not write a larger one, the plugin does not read one.
const MaxNamespaceViewBytes = 4 << 20

// NamespaceView is the agent's view of which namespaces its selector enrolls, published in a
// file (contract.EnrollNamespacesFile) for the plugin: a pod of a namespace in NotEnrolled is
// certainly not enrolled, as far as the agent knew when it wrote the file, so the plugin passes
// it through without the agent. Enrolled namespaces and namespaces in neither list (created
// after the file was written) are decided by the agent. hostNetwork and the pod opt-out label
// are the agent's: a pod of an enrolled namespace is always asked about.
type NamespaceView struct {
	Version int `json:"version"`
	// Selector is the namespace selector in effect when the view was written.
	Selector string `json:"selector"`
	// Generation grows with every write, across the agent's restarts.
	Generation uint64    `json:"generation"`
	WrittenAt  time.Time `json:"writtenAt"`
	// Enrolled are the namespaces the selector matches, NotEnrolled every other namespace the
	// agent's informer holds; both sorted.
	Enrolled    []string `json:"enrolled"`
	NotEnrolled []string `json:"notEnrolled"`
}

// Lookup says what the view knows of namespace: known is false for a namespace in neither list.
// One in both (never written so) counts as enrolled: the agent decides.
func (v *NamespaceView) Lookup(namespace string) (enrolled, known bool) {
	if slices.Contains(v.Enrolled, namespace) {
		return true, true
	}
	return false, slices.Contains(v.NotEnrolled, namespace)
}

// SameNamespaces says whether v and o enroll the same namespaces by the same selector:
// whether writing o changes what the plugin decides.
func (v *NamespaceView) SameNamespaces(o *NamespaceView) bool {
	return v.Selector == o.Selector && slices.Equal(v.Enrolled, o.Enrolled) && slices.Equal(v.NotEnrolled, o.NotEnrolled)
}

// ReadNamespaceView reads the view at path. A missing file satisfies
// errors.Is(err, fs.ErrNotExist); one that is not a regular file, over MaxNamespaceViewBytes,
// not JSON or of another version is an error naming path.
func ReadNamespaceView(path string) (*NamespaceView, error) {
	b, err := statefile.Read(path, MaxNamespaceViewBytes)
	if err != nil {
		return nil, fmt.Errorf("namespace view: %w", err)
	}
	var v NamespaceView
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("namespace view %s: %w", path, err)
	}
	if v.Version != NamespaceViewVersion {
		return nil, fmt.Errorf("namespace view %s: version %d, want %d", path, v.Version, NamespaceViewVersion)
	}
	return &v, nil
}

// WriteNamespaceView replaces the view at path atomically (statefile.WriteAtomic), so a reader
// finds the old view or the new one, never part of one.
func WriteNamespaceView(path string, v *NamespaceView) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("namespace view: %w", err)
	}
	b = append(b, '\n')
	if len(b) > MaxNamespaceViewBytes {
		return fmt.Errorf("namespace view of %d namespaces is %d bytes, more than the %d the plugin reads",
			len(v.Enrolled)+len(v.NotEnrolled), len(b), MaxNamespaceViewBytes)
	}
	if err := statefile.WriteAtomic(path, b); err != nil {
		return fmt.Errorf("namespace view %s: %w", path, err)
	}
	return nil
}
