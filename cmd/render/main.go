// Command render prints svclb's manifests as YAML, for people and kubectl:
//
//	go run ./cmd/render node -proxy builtin | kubectl apply -f -
//	go run ./cmd/render node -proxy envoy -envoy-image envoyproxy/envoy:v1.39.1 -envoy-bootstrap bootstrap.yaml
//	go run ./cmd/render mesh < pod.yaml   # adds the capture init container
//
// It is not an image (the name has no svclb- prefix, so `make images` skips it).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aether-mesh/svclb/fixtures/images"
	"github.com/aether-mesh/svclb/fixtures/manifests"
	"github.com/aether-mesh/svclb/pkg/contract"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: render node|mesh [flags]")
		os.Exit(2)
	}
	var objs []client.Object
	var err error
	switch os.Args[1] {
	case "node":
		objs, err = node(os.Args[2:])
	case "mesh":
		objs, err = mesh(os.Args[2:], os.Stdin)
	default:
		err = fmt.Errorf("unknown command %q (want node or mesh)", os.Args[1])
	}
	if err == nil {
		var y []byte
		if y, err = manifests.YAML(objs); err == nil {
			_, err = os.Stdout.Write(y)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func node(args []string) ([]client.Object, error) {
	fs := flag.NewFlagSet("node", flag.ExitOnError)
	proxy := fs.String("proxy", manifests.ProxyBuiltin, "node proxy: "+manifests.ProxyBuiltin+" or "+manifests.ProxyEnvoy)
	envoyImage := fs.String("envoy-image", "", "Envoy image (with -proxy envoy)")
	bootstrap := fs.String("envoy-bootstrap", "", "Envoy bootstrap file (with -proxy envoy)")
	var o manifests.NodeOptions
	fs.BoolVar(&o.Phase1, contract.KeyPhase1, false, "initial "+contract.KeyPhase1+" in ConfigMap "+contract.AgentConfigMap)
	fs.BoolVar(&o.Phase2, contract.KeyPhase2, false, "initial "+contract.KeyPhase2+" in ConfigMap "+contract.AgentConfigMap)
	fs.StringVar(&o.Images.Agent, "agent-image", "", "agent image (default "+images.Local(contract.ImageAgent)+")")
	fs.StringVar(&o.Images.NodeProxy, "nodeproxy-image", "", "built-in proxy image (default "+images.Local(contract.ImageNodeProxy)+")")
	fs.Parse(args)
	switch *proxy {
	case manifests.ProxyBuiltin:
	case manifests.ProxyEnvoy:
		if *envoyImage == "" || *bootstrap == "" {
			return nil, errors.New("-proxy envoy needs -envoy-image and -envoy-bootstrap")
		}
		b, err := os.ReadFile(*bootstrap)
		if err != nil {
			return nil, err
		}
		o.Proxy = manifests.EnvoyProxy(*envoyImage, b)
	default:
		return nil, fmt.Errorf("-proxy %q: want builtin or envoy", *proxy)
	}
	return manifests.Node(o), nil
}

func mesh(args []string, in io.Reader) ([]client.Object, error) {
	fs := flag.NewFlagSet("mesh", flag.ExitOnError)
	image := fs.String("capture-image", "", "capture image (default "+images.Local(contract.ImageCapture)+")")
	fs.Parse(args)
	b, err := io.ReadAll(in)
	if err != nil {
		return nil, err
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decode the Pod on stdin: %w", err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("stdin holds a %T; mesh takes one Pod", obj)
	}
	if pod, err = manifests.MeshedPod(pod, *image); err != nil {
		return nil, err
	}
	pod.APIVersion, pod.Kind = "v1", "Pod"
	return []client.Object{pod}, nil
}
