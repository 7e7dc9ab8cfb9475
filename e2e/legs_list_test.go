package e2e

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// LegsListVar switches TestLegsList on: svclb-e2e list (and run, to check its selection)
// runs the suite binary with it and -ginkgo.json-report, and reads the legs, their labels and
// what a label filter selects from that report. Nothing touches a cluster: TestMain runs no
// setup while SVCLB_E2E is not 1, and a dry run runs no node.
const LegsListVar = "SVCLB_LEGS_LIST"

// TestLegsList walks the suite's tree as a Ginkgo dry run.
func TestLegsList(t *testing.T) {
	if os.Getenv(LegsListVar) != "1" {
		t.Skip("lists the legs for svclb-e2e list (" + LegsListVar + "=1)")
	}
	RegisterFailHandler(Fail)
	suiteCfg, reporterCfg := GinkgoConfiguration()
	suiteCfg.DryRun = true
	RunSpecs(t, "svclb acceptance legs (list)", suiteCfg, reporterCfg)
}
