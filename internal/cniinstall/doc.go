// Package cniinstall puts svclb-cni on a node, as Istio's install-cni does: it copies the
// plugin binary into the host's CNI bin directory and writes its own conflist,
// contract.CNIConfFile: the main plugin's conflist (the first file of the CNI conf directory,
// whichever main plugin wrote it: flannel's, kindnet's) with the plugin appended, named to sort
// first so the runtime uses it. It never writes the main plugin's file, which that plugin's
// DaemonSet may rewrite at any time (the offline cluster's flannel re-renders it every 5 s);
// it follows that file's changes and restores a deleted binary or conflist while it runs.
// Stopped, it removes both only when its DaemonSet no longer runs it (InstallerWanted): a
// rolling update of the node DaemonSet must not open a window for uncaptured pods.
package cniinstall
