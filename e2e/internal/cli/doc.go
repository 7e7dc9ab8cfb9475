// Package e2ecli is the svclb-e2e command (e2e/cmd/svclb-e2e): the acceptance suite on any
// cluster a kubeconfig reaches, the way kind's CLI is built — a small main, one cobra command
// per file here, and the work of each in its own package:
//
//	run        e2e/internal/suiterun: the suite binary (go test -c ./e2e) with the env it reads, the
//	           signal path (forward once, wait, restore the cluster, write the report)
//	list       e2e/internal/suiterun: the legs and their labels, from a Ginkgo dry run of the binary
//	report     e2e/internal/suiterun: e2e/cmd/report over an artifacts directory, then the verdict table
//	uninstall  e2e/internal/uninstall: everything svclb deployed removed, kube-proxy's cuts put
//	           back, verified in every node's nftables
//	doctor     e2e/internal/doctor: what the cluster has and lacks for the suite
//	images     e2e/internal/imagepush: images push, the project's images tagged and pushed to --registry
//
// target.go is where the kubeconfig and context come from (Target): --kubeconfig, else
// $KUBECONFIG (kubectl's rules: a list is merged), else ~/.kube/config; --context, else the
// current context. make e2e-svc passes --kubeconfig _output/kubeconfig.
package cli
