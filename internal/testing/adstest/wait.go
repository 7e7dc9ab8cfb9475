package adstest

import (
	"testing"
	"time"

	"github.com/onsi/gomega"
)

// Eventually waits until f holds, failing t after 10 s, polling every 10 ms.
func Eventually(t testing.TB, what string, f func() bool) {
	t.Helper()
	gomega.NewWithT(t).Eventually(f).WithTimeout(10*time.Second).WithPolling(10*time.Millisecond).
		Should(gomega.BeTrue(), "waiting for %s", what)
}
