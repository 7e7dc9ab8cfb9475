package enroll

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Handler is the agent's side of the protocol.
type Handler interface {
	// Decide says whether pod is enrolled; it must answer from local state, fast.
	Decide(ctx context.Context, pod Pod) (Decision, error)
	// Add records the enrolled pod and returns once its capture listener listens in
	// pod.Netns, or ctx ends.
	Add(ctx context.Context, pod Pod) error
	// Ready returns nil when the enrolled pod's capture listener listens (CHECK).
	Ready(ctx context.Context, pod Pod) error
	// Del forgets the pod; it is not an error if the pod was never added.
	Del(ctx context.Context, pod Pod) error
}

// Observer, when a Handler implements it, is told how long each request took the agent: from
// the request read to the last reply (for an add of an enrolled pod, the listener's wait).
type Observer interface {
	Observe(op Op, enrolled bool, took time.Duration, err error)
}

// DefaultTimeout bounds an add's wait for the listener when the request names none.
const DefaultTimeout = 60 * time.Second

// Bounds on what one peer of the socket can hold of the agent.
const (
	// MaxTimeout caps the wait a request asks for.
	MaxTimeout = 2 * time.Minute
	// MaxRequestBytes caps one request: a pod's names, UID, container ID and netns path take a
	// few hundred bytes.
	MaxRequestBytes = 16 << 10
	// MaxConns caps the connections served at once; more wait in the socket's backlog. The
	// kubelet starts a node's sandboxes a few at a time.
	MaxConns = 64
	// requestReadTimeout bounds the wait for the request once connected.
	requestReadTimeout = 10 * time.Second
)

// acceptBackoff is the wait after a failed accept, doubled per failure in a row up to its
// cap, as net/http's Server does: a transient failure (EMFILE, ENFILE, ECONNABORTED) must not
// end the server, and a persistent one must not spin.
var acceptBackoff = struct{ first, max time.Duration }{5 * time.Millisecond, time.Second}

// Listen opens the socket at path (mode 0600, its directory created), replacing a stale one
// a previous agent left.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("enroll: socket directory: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("enroll: remove stale socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("enroll: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("enroll: chmod %s: %w", path, err)
	}
	return ln, nil
}

// Serve answers connections on ln with h until ctx ends or ln is closed; it closes ln. A
// failed accept is retried after a backoff, logged at most once a backoff cycle; at most
// MaxConns connections are served at once.
func Serve(ctx context.Context, ln net.Listener, h Handler, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, MaxConns)
	var delay time.Duration
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		conn, err := ln.Accept()
		if err != nil {
			<-slots
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, net.ErrClosed):
				return fmt.Errorf("enroll: accept: %w", err)
			}
			if delay == 0 {
				delay = acceptBackoff.first
				log.Warn("enroll: accept failed; retrying", "error", err)
			} else {
				delay = min(2*delay, acceptBackoff.max)
			}
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		delay = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			defer conn.Close()
			serveConn(ctx, conn, h, log)
		}()
	}
}

func serveConn(ctx context.Context, conn net.Conn, h Handler, log *slog.Logger) {
	// The plugin hangs up when it gives up (its ADD failed): stop waiting for it then.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	enc := json.NewEncoder(conn)
	reply := func(r Reply) bool {
		if err := enc.Encode(r); err != nil {
			log.Warn("enroll: reply to the plugin failed", "error", err)
			return false
		}
		return true
	}
	_ = conn.SetReadDeadline(time.Now().Add(requestReadTimeout))
	var req Request
	r := bufio.NewReader(io.LimitReader(conn, MaxRequestBytes))
	if err := json.NewDecoder(r).Decode(&req); err != nil {
		reply(Reply{Error: fmt.Sprintf("malformed request: %v", err)})
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	start := time.Now()
	var (
		enrolled bool
		failed   error
	)
	if o, ok := h.(Observer); ok {
		defer func() { o.Observe(req.Op, enrolled, time.Since(start), failed) }()
	}
	go func() { // EOF or reset: the plugin is gone
		var b [1]byte
		_, _ = conn.Read(b[:])
		cancel()
	}()
	if err := req.Pod.Validate(req.Op); err != nil {
		reply(Reply{Error: err.Error()})
		return
	}
	timeout := DefaultTimeout
	if req.TimeoutMillis > 0 {
		timeout = time.Duration(min(req.TimeoutMillis, MaxTimeout.Milliseconds())) * time.Millisecond
	}
	switch req.Op {
	case OpDel:
		if err := h.Del(ctx, req.Pod); err != nil {
			failed = err
			reply(Reply{Error: err.Error()})
			return
		}
		reply(Reply{})
	case OpAdd, OpCheck:
		d, err := h.Decide(ctx, req.Pod)
		if err != nil {
			failed = err
			reply(Reply{Error: err.Error()})
			return
		}
		enrolled = d.Enrolled
		r := Reply{Enrolled: d.Enrolled, Reason: d.Reason}
		if d.Enrolled {
			r.NodeAddrs = d.NodeAddrs
		}
		if !reply(r) || !d.Enrolled {
			return
		}
		wctx, wcancel := context.WithTimeout(ctx, timeout)
		defer wcancel()
		if req.Op == OpAdd {
			err = h.Add(wctx, req.Pod)
		} else {
			err = h.Ready(wctx, req.Pod)
		}
		if err != nil {
			failed = err
			reply(Reply{Enrolled: true, Error: err.Error()})
			return
		}
		log.Debug("enroll: pod's capture listener is up", "op", req.Op, "pod", req.Pod.String(), "netns", req.Pod.Netns)
		reply(Reply{Enrolled: true, Listening: true})
	default:
		reply(Reply{Error: fmt.Sprintf("unknown op %q", req.Op)})
	}
}
