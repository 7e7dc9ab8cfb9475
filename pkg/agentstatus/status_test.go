package agentstatus_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/pkg/agentstatus"
)

// full sets every field, so that the golden document names each JSON key the agent serves.
var full = agentstatus.Status{
	Node: "n", Zone: "z", NodeAddresses: []string{"1.2.3.4"}, Phase1: true, Phase2: true, SnapshotVersion: 3, Clusters: 4, Endpoints: 5,
	Listeners:  []agentstatus.ListenerStatus{{Pod: "p", Namespace: "ns", Netns: "/x", Name: "l"}},
	RangeKnown: true, Range: []string{"10.96.0.0/16"}, CDS: agentstatus.CDSOnDemand, Demanded: 6, Pending: 7, Forgotten: 8, Refusal: "reset", RefusedAtSyn: 9,
	SettingsErrors: []agentstatus.SettingError{{Key: "k", Value: "v", Kept: "kk", Reason: "r"}},
	Enrollment: &agentstatus.EnrollmentStatus{
		NamespaceSelector: "sel", Enrolled: []string{"a/b"}, Uncaptured: []string{"c/d"},
		NamespaceView: &agentstatus.NamespaceViewStatus{File: "f", Generation: 9, WrittenAt: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Error: "e"},
	},
}

// TestStatusJSON pins the document's keys: the suites of an older or newer tree decode it.
func TestStatusJSON(t *testing.T) {
	want, err := os.ReadFile("testdata/status.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(full, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
		t.Fatalf("/status document changed:\n%s\nwant (testdata/status.json):\n%s", got, want)
	}
	dec := json.NewDecoder(bytes.NewReader(want))
	dec.DisallowUnknownFields()
	var back agentstatus.Status
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("decode the golden document: %v", err)
	}
}

// TestStatusJSONOmits: a node without the CNI plugin serves no "enrollment" key.
func TestStatusJSONOmits(t *testing.T) {
	b, err := json.Marshal(agentstatus.Status{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"enrollment"`)) {
		t.Fatalf("zero Status has an enrollment key: %s", b)
	}
}
