package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// shutdownGrace is how long Serve lets requests in flight finish once its context ends.
const shutdownGrace = 2 * time.Second

// Listen listens on TCP addr and, with lim.MaxConns, accepts no more connections than that
// at once: the next Accept waits until one of them is closed.
func Listen(addr string, lim Limits) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("httpserve: listen %s: %w", addr, err)
	}
	return Limit(ln, lim), nil
}

// Limit caps the connections ln hands out at once at lim.MaxConns (0: unchanged).
func Limit(ln net.Listener, lim Limits) net.Listener {
	if lim.MaxConns <= 0 {
		return ln
	}
	return netutil.LimitListener(ln, lim.MaxConns)
}

// Server is an http.Server for h with lim's timeouts and header cap; the connection cap is
// the listener's (Listen, Limit).
func Server(h http.Handler, lim Limits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
	}
}

// Serve serves h with lim on every listener until ctx ends or one of them fails, then shuts
// the server down (requests in flight get shutdownGrace) and closes the listeners. It
// returns nil when ctx ended, else the first listener's error.
func Serve(ctx context.Context, h http.Handler, lim Limits, lns ...net.Listener) error {
	if len(lns) == 0 {
		return errors.New("httpserve: no listener")
	}
	srv := Server(h, lim)
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("httpserve: serve %s: %w", ln.Addr(), err)
				return
			}
			errc <- nil
		}()
	}
	var err error
	pending := len(lns)
	select {
	case <-ctx.Done():
	case err = <-errc:
		pending--
		if err == nil { // only Shutdown or Close ends Serve without an error, and neither was ours
			err = errors.New("httpserve: server closed")
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		_ = srv.Close() // the grace ran out: cut what is left
	}
	for range pending {
		if perr := <-errc; err == nil && ctx.Err() == nil {
			err = perr // another listener's failure, while none was asked to stop
		}
	}
	return err
}
