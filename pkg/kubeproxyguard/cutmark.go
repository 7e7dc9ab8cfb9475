package kubeproxyguard

import (
	"strings"

	"github.com/google/nftables/expr"
)

// CutCommentPrefix starts the comment the guard writes on every element it
// cuts (verdict continue): "svclb-guard-cut|<verdict>|<kube-proxy's comment>",
// e.g. "svclb-guard-cut|goto service-C642UMGT-default/demo/tcp/http|" or
// "svclb-guard-cut|goto reject-chain|default/empty:5353-53". It tells the
// guard and `nft list` readers that the element is the guard's cut, and keeps
// what the guard writes back when the Service stops being chosen. "|" is in
// no kube-proxy chain name or ServicePortName (DNS labels, IANA port names).
// A cut whose original would not fit maxCommentLen carries the bare prefix:
// it routes nothing all the same, but only kube-proxy's next full sync puts
// it back.
const CutCommentPrefix = "svclb-guard-cut"

// maxCommentLen is nft's limit on a comment (NFTNL_UDATA_COMMENT_MAXLEN in
// libnftnl, "comment too long, 128 characters maximum allowed"; the kernel
// allows NFT_USERDATA_MAXLEN = 256 bytes of userdata): within it, `nft list`
// output of a cut table still loads with `nft -f`.
const maxCommentLen = 128

const cutSep = "|"

// cutMark is what a cut element's comment keeps of kube-proxy's element.
type cutMark struct {
	Verdict verdict // kube-proxy's verdict; Code verdictUnknown when not kept
	Comment string  // kube-proxy's comment ("" for service-ips)
}

// verdictUnknown marks a verdict the guard could not keep or read.
const verdictUnknown = -100

// restorable reports whether the mark holds kube-proxy's verdict.
func (m cutMark) restorable() bool { return m.Verdict.Code != verdictUnknown }

// cutComment is the comment of the cut element replacing one with verdict v
// and comment c; ok is false when they do not fit (the bare prefix is
// returned then).
func cutComment(v verdict, c string) (string, bool) {
	s := CutCommentPrefix + cutSep + v.String() + cutSep + c
	if len(s) > maxCommentLen || strings.Contains(c, cutSep) {
		return CutCommentPrefix, false
	}
	return s, true
}

// parseCutComment reads a cut element's comment; ok is false when it is not
// the guard's.
func parseCutComment(s string) (cutMark, bool) {
	if s == CutCommentPrefix {
		return cutMark{Verdict: verdict{Code: verdictUnknown}}, true
	}
	rest, ok := strings.CutPrefix(s, CutCommentPrefix+cutSep)
	if !ok {
		return cutMark{}, false
	}
	vs, c, ok := strings.Cut(rest, cutSep)
	if !ok {
		return cutMark{Verdict: verdict{Code: verdictUnknown}}, true
	}
	v, ok := parseVerdict(vs)
	if !ok {
		return cutMark{Verdict: verdict{Code: verdictUnknown}}, true
	}
	return cutMark{Verdict: v, Comment: c}, true
}

// parseVerdict reads a verdict as verdict.String prints it.
func parseVerdict(s string) (verdict, bool) {
	word, chain, _ := strings.Cut(s, " ")
	switch word {
	case "goto", "jump":
		if chain == "" {
			return verdict{}, false
		}
		code := int32(expr.VerdictGoto)
		if word == "jump" {
			code = int32(expr.VerdictJump)
		}
		return verdict{Code: code, Chain: chain}, true
	case "drop", "accept", "return":
		if chain != "" {
			return verdict{}, false
		}
		return verdict{Code: map[string]int32{"drop": int32(expr.VerdictDrop), "accept": int32(expr.VerdictAccept), "return": int32(expr.VerdictReturn)}[word]}, true
	}
	return verdict{}, false
}

// nftVerdict is v as google/nftables writes it into a verdict map.
func (v verdict) nftVerdict() *expr.Verdict {
	return &expr.Verdict{Kind: expr.VerdictKind(v.Code), Chain: v.Chain}
}
