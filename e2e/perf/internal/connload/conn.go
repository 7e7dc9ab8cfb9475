package connload

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"
)

// Options are what every mode shares.
type Options struct {
	To      string        // host:port of an echo server or a Service in front of one
	Timeout time.Duration // per connection: connect + hello (Bulk: on top of its duration)
	// Dial connects; nil is a net.Dialer's.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func (o Options) check() error {
	if _, _, err := net.SplitHostPort(o.To); err != nil {
		return fmt.Errorf("connload: destination %q: %w", o.To, err)
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("connload: timeout %s: want > 0", o.Timeout)
	}
	return nil
}

func (o Options) dial(ctx context.Context) (net.Conn, error) {
	if o.Dial != nil {
		return o.Dial(ctx, "tcp", o.To)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", o.To)
}

// hello opens one connection, waits for the first byte of the server's
// hello and returns when it came; it then reads the rest of the line and
// closes (the client's FIN first, as a client that is done would).
func hello(ctx context.Context, o Options) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	c, err := o.dial(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	r := bufio.NewReader(c)
	if _, err := r.Peek(1); err != nil {
		return time.Time{}, err
	}
	first := time.Now()
	if _, err := r.ReadSlice('\n'); err != nil {
		return time.Time{}, fmt.Errorf("hello: %w", err)
	}
	return first, nil
}
