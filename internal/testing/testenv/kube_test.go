package testenv

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
				_, _ = fmt.Fprintf(c, "echo %s", line) // a failed write fails the reader below
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
	if _, err := fmt.Fprintf(c, "hi\n"); err != nil {
		t.Fatal(err)
	}
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
