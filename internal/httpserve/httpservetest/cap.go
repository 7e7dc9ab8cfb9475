// Package httpservetest checks a running server for the bounds internal/httpserve gives it.
package httpservetest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// heldFor is how long a connection over the cap must go unanswered.
const heldFor = 500 * time.Millisecond

// CheckCap holds n keep-alive connections to addr, each having had its GET of path answered,
// and checks that one more is not answered while they are held, and is once one of them
// leaves.
func CheckCap(t testing.TB, addr, path string, n int) {
	t.Helper()
	held := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, n, err)
		}
		held = append(held, c)
		if err := get(c, bufio.NewReader(c), addr, path); err != nil {
			t.Fatalf("connection %d of %d (under the cap): %v", i+1, n, err)
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	answered := make(chan error, 1)
	go func() { answered <- get(c, bufio.NewReader(c), addr, path) }()
	select {
	case err := <-answered:
		t.Fatalf("connection %d to %s was served while %d were held (err %v): no connection cap", n+1, addr, n, err)
	case <-time.After(heldFor):
	}
	held[0].Close()
	held = held[1:]
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("connection %d, once a slot freed: %v", n+1, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("connection %d was not served after a held one left", n+1)
	}
}

// get sends one keep-alive GET of path on c and wants a 200.
func get(c net.Conn, r *bufio.Reader, addr, path string) error {
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		return err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return err
}
