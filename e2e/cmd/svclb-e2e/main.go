// Command svclb-e2e runs svclb's acceptance suite against the cluster a kubeconfig reaches,
// lists its legs, renders its report, checks a cluster for it and uninstalls svclb
// (docs/cli.md; the commands are e2e/internal/cli).
package main

import (
	"context"
	"os"

	"github.com/aether-mesh/svclb/e2e/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
