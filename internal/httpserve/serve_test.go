package httpserve_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/svclb/internal/httpserve"
	"github.com/aether-mesh/svclb/pkg/contract"
)

// start serves an "ok" handler with lim on a loopback port until the test ends.
func start(t *testing.T, lim httpserve.Limits) string {
	t.Helper()
	ln, err := httpserve.Listen("127.0.0.1:0", lim)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	go func() { done <- httpserve.Serve(ctx, h, lim, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends one keep-alive GET on c and reads the answer.
func get(c net.Conn, r *bufio.Reader) (*http.Response, error) {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// closedWithin waits until the server closes c (EOF or a reset) and returns how long that
// took. It fails the test if that takes longer than max or, unless reply, if the server wrote
// anything first (net/http may answer 400 to a request its timeout cut midway).
func closedWithin(t *testing.T, c net.Conn, max time.Duration, reply bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	_ = c.SetReadDeadline(t0.Add(max))
	got, err := io.ReadAll(c)
	took := time.Since(t0)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %s", max)
	}
	if len(got) > 0 && !reply {
		t.Fatalf("the server wrote %q to a client that sent nothing", got)
	}
	return took
}

// short are limits a test can wait out.
func short() httpserve.Limits {
	return httpserve.Limits{
		ReadHeaderTimeout: 300 * time.Millisecond,
		ReadTimeout:       600 * time.Millisecond,
		WriteTimeout:      time.Second,
		IdleTimeout:       500 * time.Millisecond,
		MaxHeaderBytes:    4 << 10,
		MaxConns:          2,
	}
}

// TestSilentConnectionIsCut: a client that connects and sends nothing is closed once the
// header timeout runs out, not before.
func TestSilentConnectionIsCut(t *testing.T) {
	lim := short()
	lim.MaxConns = 0
	addr := start(t, lim)
	c := dial(t, addr)
	if took := closedWithin(t, c, 5*time.Second, false); took < lim.ReadHeaderTimeout/2 {
		t.Errorf("closed after %s, before the header timeout %s", took, lim.ReadHeaderTimeout)
	}
}

// TestSlowHeadersAreCut: headers that trickle in byte by byte are cut at the header timeout,
// however often a byte arrives.
func TestSlowHeadersAreCut(t *testing.T) {
	lim := short()
	addr := start(t, lim)
	c := dial(t, addr)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for _, b := range []byte("GET / HTTP/1.1\r\nX-Slow: " + strings.Repeat("a", 200)) {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
		}
	}()
	closedWithin(t, c, 5*time.Second, true)
}

// TestIdleKeepAliveIsCut: a keep-alive connection that sends no next request is closed at
// the idle timeout.
func TestIdleKeepAliveIsCut(t *testing.T) {
	lim := short()
	addr := start(t, lim)
	c := dial(t, addr)
	r := bufio.NewReader(c)
	if resp, err := get(c, r); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %v %v", resp, err)
	}
	t0 := time.Now()
	_ = c.SetReadDeadline(t0.Add(5 * time.Second))
	_, err := r.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("idle keep-alive connection still open after 5s")
	}
	if took := time.Since(t0); took < lim.IdleTimeout/2 {
		t.Errorf("closed after %s, before the idle timeout %s", took, lim.IdleTimeout)
	}
}

// TestConnectionsOverTheCapWait: with MaxConns held by clients that send nothing, a third
// client is not served until the header timeout has cut one of them; with them held by
// keep-alive clients, until one of those leaves.
func TestConnectionsOverTheCapWait(t *testing.T) {
	t.Run("silent", func(t *testing.T) {
		lim := short()
		addr := start(t, lim)
		// A silent connection's header timeout runs from its accept, which
		// comes after this instant: the third client cannot be served
		// before it plus the timeout, however late the scheduler runs
		// this test (measuring from after the dials made a loaded host
		// look like a cap that did not hold).
		t0 := time.Now()
		for range lim.MaxConns {
			dial(t, addr)
		}
		time.Sleep(50 * time.Millisecond) // both accepted: the cap is taken
		c := dial(t, addr)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		resp, err := get(c, bufio.NewReader(c))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("third client: %v %v", resp, err)
		}
		if took := time.Since(t0); took < lim.ReadHeaderTimeout {
			t.Errorf("third client served %s after the silent connections were dialled, with %d of them held and a header timeout of %s",
				took, lim.MaxConns, lim.ReadHeaderTimeout)
		}
	})
	t.Run("keep-alive", func(t *testing.T) {
		lim := short()
		lim.IdleTimeout = time.Minute // only the client's leaving frees a slot
		addr := start(t, lim)
		var held []net.Conn
		for range lim.MaxConns {
			c := dial(t, addr)
			if resp, err := get(c, bufio.NewReader(c)); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("held client: %v %v", resp, err)
			}
			held = append(held, c)
		}
		c := dial(t, addr)
		r := bufio.NewReader(c)
		answered := make(chan error, 1)
		go func() {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			_, err := get(c, r)
			answered <- err
		}()
		select {
		case err := <-answered:
			t.Fatalf("a client over the cap of %d was served at once (err %v)", lim.MaxConns, err)
		case <-time.After(500 * time.Millisecond):
		}
		held[0].Close()
		select {
		case err := <-answered:
			if err != nil {
				t.Fatalf("client over the cap, once a slot freed: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a freed slot did not serve the waiting client")
		}
	})
}

// TestHeaderCap: headers over MaxHeaderBytes get 431 and no handler.
func TestHeaderCap(t *testing.T) {
	lim := short()
	addr := start(t, lim)
	c := dial(t, addr)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	big := "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2*lim.MaxHeaderBytes+8192) + "\r\n\r\n"
	go func() { _, _ = io.WriteString(c, big) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
}

// TestServeEndsWithContext: Serve returns nil once its context ends, having closed every
// listener.
func TestServeEndsWithContext(t *testing.T) {
	var lns []net.Listener
	for range 2 {
		ln, err := httpserve.Listen("127.0.0.1:0", httpserve.Defaults())
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- httpserve.Serve(ctx, http.NotFoundHandler(), httpserve.Defaults(), lns...) }()
	for _, ln := range lns {
		c := dial(t, ln.Addr().String())
		if resp, err := get(c, bufio.NewReader(c)); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s: %v %v", ln.Addr(), resp, err)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	for _, ln := range lns {
		if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts", ln.Addr())
		}
	}
}

// TestDefaultsAreTheContract: every server runs with the contract's bounds, and each is set.
func TestDefaultsAreTheContract(t *testing.T) {
	d := httpserve.Defaults()
	want := httpserve.Limits{
		ReadHeaderTimeout: contract.HTTPReadHeaderTimeout, ReadTimeout: contract.HTTPReadTimeout,
		WriteTimeout: contract.HTTPWriteTimeout, IdleTimeout: contract.HTTPIdleTimeout,
		MaxHeaderBytes: contract.HTTPMaxHeaderBytes, MaxConns: contract.HTTPMaxConns,
	}
	if d != want {
		t.Errorf("Defaults %+v, want %+v", d, want)
	}
	if d.ReadHeaderTimeout <= 0 || d.ReadTimeout <= 0 || d.WriteTimeout <= 0 || d.IdleTimeout <= 0 || d.MaxHeaderBytes <= 0 || d.MaxConns <= 0 {
		t.Errorf("a bound is unset: %+v", d)
	}
	s := httpserve.Server(http.NotFoundHandler(), d)
	if s.ReadHeaderTimeout != d.ReadHeaderTimeout || s.ReadTimeout != d.ReadTimeout || s.WriteTimeout != d.WriteTimeout ||
		s.IdleTimeout != d.IdleTimeout || s.MaxHeaderBytes != d.MaxHeaderBytes {
		t.Errorf("Server does not carry the limits: %+v", s)
	}
}

func TestLoopbackAddr(t *testing.T) {
	if got := httpserve.LoopbackAddr(9750); got != "127.0.0.1:9750" {
		t.Errorf("LoopbackAddr(9750) = %q", got)
	}
}
