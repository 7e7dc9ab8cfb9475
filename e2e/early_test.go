package e2e

import (
	. "github.com/onsi/ginkgo/v2"
)

// Background prepares (leg.Leg.Early): BeforeSuite starts the prepares of
// the selected legs marked early, in the legs' order, leg.EarlyParallel at
// a time, while the first legs run (leg.Suite.StartEarly); AfterSuite ends
// those still running.
var _ = BeforeSuite(func() {
	if err := legs.StartEarly(GinkgoLabelFilter()); err != nil {
		Fail(err.Error())
	}
})

var _ = AfterSuite(func() { legs.StopEarly() })
