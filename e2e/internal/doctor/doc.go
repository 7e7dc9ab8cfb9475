// Package e2edoctor says what a cluster has and lacks for the acceptance suite (svclb-e2e
// doctor), from the API alone, so it works on any cluster a kubeconfig reaches:
//
//   - kube-proxy in nftables mode (the guard cuts nftables objects only): its ConfigMap
//     kube-system/kube-proxy (config.conf, mode), else its DaemonSet's --proxy-mode;
//   - the Service range: the ServiceCIDRs (networking.k8s.io/v1), what the agent's Service
//     range is read from;
//   - the nodes: how many, which are Ready, their roles (the control-plane label) and
//     zones (topology.kubernetes.io/zone): the legs dial from a client on every node, from
//     "the first worker", and the topology leg wants two zones or more;
//   - the images: each node's status lists the images it holds; the project's :dev images
//     are never pulled (kind-loaded, make images), Envoy's is pulled where it is missing.
//
// Each check is a Line: ok, warn (a leg will fail or skip, the run can go on) or FAIL (the
// suite cannot run). Run returns them all; the command exits non-zero on a FAIL.
package doctor
