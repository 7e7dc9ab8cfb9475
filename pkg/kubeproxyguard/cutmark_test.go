package kubeproxyguard

import (
	"strings"
	"testing"
)

// The cut's comment keeps kube-proxy's verdict and comment, reads back to
// them, and stays within nft's comment limit; what does not fit is the bare
// prefix, still recognised as a cut but not restorable.
func TestCutComment(t *testing.T) {
	for _, tc := range []struct {
		verdict, comment, want string
	}{
		{"goto service-C642UMGT-default/demo/tcp/http", "", "svclb-guard-cut|goto service-C642UMGT-default/demo/tcp/http|"},
		{"goto local-2Q7NANCK-default/local/tcp/dns", "", "svclb-guard-cut|goto local-2Q7NANCK-default/local/tcp/dns|"},
		{"goto reject-chain", "default/empty:5353-53", "svclb-guard-cut|goto reject-chain|default/empty:5353-53"},
		{"drop", "default/remote-only:p", "svclb-guard-cut|drop|default/remote-only:p"},
	} {
		v, ok := parseVerdict(tc.verdict)
		if !ok {
			t.Fatalf("parseVerdict(%q) failed", tc.verdict)
		}
		got, kept := cutComment(v, tc.comment)
		if got != tc.want || !kept {
			t.Errorf("cutComment(%s, %q) = %q, %v; want %q", tc.verdict, tc.comment, got, kept, tc.want)
		}
		m, ok := parseCutComment(got)
		if !ok || !m.restorable() || m.Verdict.String() != tc.verdict || m.Comment != tc.comment {
			t.Errorf("parseCutComment(%q) = %+v, %v", got, m, ok)
		}
	}

	// A 63-character namespace and name: kube-proxy's chain name fits nft's
	// 256 but the cut's comment would not fit 128.
	long := strings.Repeat("n", 63)
	v, _ := parseVerdict("goto service-AAAAAAAA-" + long + "/" + long + "/tcp/http")
	got, kept := cutComment(v, "")
	if kept || got != CutCommentPrefix {
		t.Errorf("too long: %q, %v; want the bare prefix", got, kept)
	}
	if m, ok := parseCutComment(got); !ok || m.restorable() {
		t.Errorf("bare prefix: %+v, %v; want a cut that is not restorable", m, ok)
	}
	for _, s := range []string{"", "default/empty:5353-53", "svclb-guard-cutx|drop|", "svclb-guard|drop|"} {
		if _, ok := parseCutComment(s); ok {
			t.Errorf("parseCutComment(%q) took it for the guard's", s)
		}
	}
	if _, ok := parseVerdict("goto"); ok {
		t.Error(`parseVerdict("goto") succeeded`)
	}
}
