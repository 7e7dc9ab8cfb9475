// Command svclb-e2e runs svclb's acceptance suite against the cluster a kubeconfig reaches,
// lists its legs, renders its report, checks a cluster for it and uninstalls svclb
// (docs/cli.md; the commands are internal/e2ecli).
package main

import (
	"context"
	"os"

	"github.com/aether-mesh/svclb/internal/e2ecli"
)

func main() {
	os.Exit(e2ecli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
