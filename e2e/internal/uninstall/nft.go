package uninstall

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/aether-mesh/svclb/pkg/kubeproxyguard"
)

// KubeProxyTable is the table kube-proxy's nftables mode writes (family ip).
const KubeProxyTable = "kube-proxy"

// Findings is what a node's ruleset holds of svclb.
type Findings struct {
	// SvclbTables are the tables whose name has "svclb" ("ip svclb-guard").
	SvclbTables []string
	// KubeProxy: table ip kube-proxy is there.
	KubeProxy bool
	// Cut are kube-proxy's elements the guard overwrote, as listed.
	Cut []string
	// Mentions counts the ruleset's lines with "svclb" anywhere (grep -c svclb): also
	// kube-proxy's own elements of Services in namespaces named svclb-*, which go with them.
	Mentions int
}

// Clean: no svclb table, kube-proxy's table there and holding no cut element.
func (f Findings) Clean() bool { return len(f.SvclbTables) == 0 && f.KubeProxy && len(f.Cut) == 0 }

// String is the findings on one line.
func (f Findings) String() string {
	kp := "table ip kube-proxy present"
	if !f.KubeProxy {
		kp = "NO table ip kube-proxy"
	}
	tables := "none"
	if len(f.SvclbTables) > 0 {
		tables = strings.Join(f.SvclbTables, ", ")
	}
	return fmt.Sprintf("svclb tables: %s; %s, %d cut elements; %d lines mention svclb", tables, kp, len(f.Cut), f.Mentions)
}

var (
	tableRe = regexp.MustCompile(`^table (\S+) (\S+) \{`)
	// A cut element: the guard's comment, or the verdict it writes (kube-proxy never writes
	// continue into its verdict maps).
	cutRe = regexp.MustCompile(`comment "` + regexp.QuoteMeta(kubeproxyguard.CutCommentPrefix) + `|:\s*continue\b`)
)

// Inspect reads a node's `nft list ruleset`.
func Inspect(ruleset string) Findings {
	var f Findings
	var table string
	for _, line := range strings.Split(ruleset, "\n") {
		if strings.Contains(line, "svclb") {
			f.Mentions++
		}
		if m := tableRe.FindStringSubmatch(line); m != nil {
			table = m[1] + " " + m[2]
			if strings.Contains(m[2], "svclb") {
				f.SvclbTables = append(f.SvclbTables, table)
			}
			if table == "ip "+KubeProxyTable {
				f.KubeProxy = true
			}
			continue
		}
		if line == "}" {
			table = ""
			continue
		}
		if table == "ip "+KubeProxyTable && cutRe.MatchString(line) {
			f.Cut = append(f.Cut, strings.TrimSuffix(strings.TrimSpace(line), ","))
		}
	}
	return f
}
