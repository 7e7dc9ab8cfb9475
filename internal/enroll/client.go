package enroll

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Client is the plugin's side: one connection per call.
type Client struct {
	Socket string // contract.EnrollSocket
	// Timeout bounds a call, the agent's wait for the listener included.
	Timeout time.Duration
}

// Add asks whether pod is enrolled. For an enrolled pod it runs install (the capture rules,
// leaving alone the node's addresses the agent named) while the agent brings the listener up,
// and returns once the agent reports the listener listening. enrolled is false with a nil error
// for a pod that is not enrolled.
func (c Client) Add(ctx context.Context, pod Pod, install func(nodeAddrs []netip.Addr) error) (enrolled bool, err error) {
	return c.exchange(ctx, OpAdd, pod, install)
}

// Check is Add without install: the decision and, if enrolled, that the listener listens.
func (c Client) Check(ctx context.Context, pod Pod) (enrolled bool, err error) {
	return c.exchange(ctx, OpCheck, pod, nil)
}

// Del tells the agent the pod's sandbox is gone.
func (c Client) Del(ctx context.Context, pod Pod) error {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	conn, dec, err := c.send(ctx, Request{Op: OpDel, Pod: pod})
	if err != nil {
		return err
	}
	defer conn.Close()
	var r Reply
	if err := c.read(dec, &r); err != nil {
		return err
	}
	if r.Error != "" {
		return fmt.Errorf("agent (%s): del %s: %s", c.Socket, pod, r.Error)
	}
	return nil
}

func (c Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.Timeout > 0 {
		return context.WithTimeout(ctx, c.Timeout)
	}
	return context.WithCancel(ctx)
}

func (c Client) exchange(ctx context.Context, op Op, pod Pod, install func([]netip.Addr) error) (bool, error) {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	req := Request{Op: op, Pod: pod}
	if dl, ok := ctx.Deadline(); ok {
		// The agent gives up a little before us, so its reason reaches us.
		req.TimeoutMillis = max(1, time.Until(dl).Milliseconds()*9/10)
	}
	conn, dec, err := c.send(ctx, req)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	var d Reply
	if err := c.read(dec, &d); err != nil {
		return false, err
	}
	if d.Error != "" {
		return false, fmt.Errorf("agent (%s): %s %s: %s", c.Socket, op, pod, d.Error)
	}
	if !d.Enrolled {
		return false, nil
	}
	if install != nil {
		if err := install(d.NodeAddrs); err != nil {
			return true, err
		}
	}
	var r Reply
	if err := c.read(dec, &r); err != nil {
		return true, fmt.Errorf("waiting for the capture listener of %s: %w", pod, err)
	}
	if r.Error != "" || !r.Listening {
		return true, fmt.Errorf("agent (%s): capture listener of %s in %s: %s", c.Socket, pod, pod.Netns, r.Error)
	}
	return true, nil
}

type conn struct {
	net.Conn
	stop func() bool
}

func (c conn) Close() error { c.stop(); return c.Conn.Close() }

func (c Client) send(ctx context.Context, req Request) (net.Conn, *json.Decoder, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.Socket)
	if err != nil {
		return nil, nil, fmt.Errorf("svclb agent unreachable on %s: %w", c.Socket, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	// Cancellation closes the connection, which ends a blocked read.
	cc := conn{Conn: nc, stop: context.AfterFunc(ctx, func() { nc.Close() })}
	if err := json.NewEncoder(nc).Encode(req); err != nil {
		_ = cc.Close()
		return nil, nil, fmt.Errorf("svclb agent on %s: send: %w", c.Socket, err)
	}
	return cc, json.NewDecoder(bufio.NewReader(nc)), nil
}

func (c Client) read(dec *json.Decoder, r *Reply) error {
	if err := dec.Decode(r); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("svclb agent on %s: no answer in time: %w", c.Socket, err)
		}
		return fmt.Errorf("svclb agent on %s: read: %w", c.Socket, err)
	}
	return nil
}
