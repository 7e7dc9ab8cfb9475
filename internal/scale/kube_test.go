package scale

import (
	"bufio"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestForward(t *testing.T) {
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "echo %s", line)
			}()
		}
	}()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := Forward(front, backend.Addr().String())
	c, err := net.Dial("tcp", front.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "hi\n")
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || got != "echo hi\n" {
		t.Fatalf("through the forwarder: %q, %v", got, err)
	}
	// A connection held open must not keep stop from returning.
	held, err := net.Dial("tcp", front.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	stop()
	if _, err := net.Dial("tcp", front.Addr().String()); err == nil {
		t.Fatal("forwarder still accepting after stop")
	}
}

func TestWriteKubeconfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	in := &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca"), CertData: []byte("cert"), KeyData: []byte("key")}}
	if err := WriteKubeconfig(in, p); err != nil {
		t.Fatal(err)
	}
	out, err := clientcmd.BuildConfigFromFlags("", p)
	if err != nil {
		t.Fatal(err)
	}
	if out.Host != in.Host || string(out.CAData) != "ca" || string(out.CertData) != "cert" || string(out.KeyData) != "key" {
		t.Fatalf("read back %+v", out)
	}
}

func TestObjects(t *testing.T) {
	s := Spec{Namespace: "scale", Services: 3, Endpoints: 10}
	seen := map[string]bool{}
	for i := range s.Services {
		svc, es, err := s.Objects(i)
		if err != nil {
			t.Fatal(err)
		}
		if es.Labels["kubernetes.io/service-name"] != svc.Name || len(es.Endpoints) != 10 {
			t.Fatalf("slice %s for %s: %d endpoints", es.Name, svc.Name, len(es.Endpoints))
		}
		for _, e := range es.Endpoints {
			if seen[e.Addresses[0]] {
				t.Fatalf("address %s used twice", e.Addresses[0])
			}
			seen[e.Addresses[0]] = true
		}
	}
	if !seen["10.128.0.0"] || !seen["10.128.0.29"] {
		t.Errorf("addresses %v: want 10.128.0.0 … 10.128.0.29", seen)
	}
	if _, _, err := (Spec{Endpoints: 1 << 20}).Objects(8); err == nil {
		t.Error("no error past the endpoint range")
	}
}
