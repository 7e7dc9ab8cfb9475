package e2e

import (
	"testing"
	"time"
)

// TestSandboxDurations parses containerd's log as journalctl -o cat prints it (lines copied
// from a kind node); it needs no cluster.
func TestSandboxDurations(t *testing.T) {
	journal := `time="2026-11-30T16:49:27.034902460Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:late,Uid:deac1d71-c815-42f6-8590-465bf3ce25f4,Namespace:svclb-enroll,Attempt:0,}"
time="2026-11-30T16:49:27.100000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:other,Uid:u2,Namespace:elsewhere,Attempt:0,}"
time="2026-11-30T16:49:28.265847760Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:late,Uid:deac1d71-c815-42f6-8590-465bf3ce25f4,Namespace:svclb-enroll,Attempt:0,} returns sandbox id \"234eb443fc09523156c71db9cd2849cf0ffc4f0a8c7d652eef015c0d865bcf58\""
time="2026-11-30T16:49:28.300000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:other,Uid:u2,Namespace:elsewhere,Attempt:0,} returns sandbox id \"x\""
`
	got := sandboxDurations(journal, "svclb-enroll")
	want := 1230945300 * time.Nanosecond
	if len(got) != 1 || len(got["svclb-enroll"]) != 1 || got["svclb-enroll"][0] != want {
		t.Fatalf("got %v, want svclb-enroll: [%s]", got, want)
	}
}
