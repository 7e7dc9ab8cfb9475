package connload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// BulkOptions is Streams connections, each writing for Duration.
type BulkOptions struct {
	Options
	Streams  int
	Duration time.Duration
}

// BulkResult is a bulk run's outcome.
type BulkResult struct {
	Streams int `json:"streams"`
	// Bytes is what came back (the echo): each byte crossed the path both ways.
	Bytes int64 `json:"bytes"`
	// Seconds is from the first write to the last stream's end.
	Seconds float64 `json:"seconds"`
	// MiBps is Bytes over Seconds, in MiB per second.
	MiBps float64 `json:"mibps"`
}

// chunk is one write: large enough that the syscalls are not the cost.
const chunk = 128 << 10

// Bulk runs the streams at once and fails if any stream does.
func Bulk(ctx context.Context, o BulkOptions) (BulkResult, error) {
	if err := o.check(); err != nil {
		return BulkResult{}, err
	}
	if o.Streams <= 0 || o.Duration <= 0 {
		return BulkResult{}, fmt.Errorf("connload: bulk of %d streams for %s: want both > 0", o.Streams, o.Duration)
	}
	conns := make([]*bufio.Reader, o.Streams)
	raw := make([]net.Conn, o.Streams)
	defer func() {
		for _, c := range raw {
			if c != nil {
				c.Close()
			}
		}
	}()
	// Every stream connects and reads its hello before the clock starts.
	for i := range raw {
		dctx, cancel := context.WithTimeout(ctx, o.Timeout)
		c, err := o.dial(dctx)
		cancel()
		if err != nil {
			return BulkResult{}, fmt.Errorf("connload: bulk stream %d: %w", i, err)
		}
		raw[i] = c
		_ = c.SetDeadline(time.Now().Add(o.Timeout))
		conns[i] = bufio.NewReaderSize(c, chunk)
		if _, err := conns[i].ReadSlice('\n'); err != nil {
			return BulkResult{}, fmt.Errorf("connload: bulk stream %d: hello: %w", i, err)
		}
		_ = c.SetDeadline(time.Time{})
	}
	start := time.Now()
	end := start.Add(o.Duration)
	var total int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for i, c := range raw {
		_ = c.SetDeadline(end.Add(o.Timeout))
		wg.Go(func() {
			n, err := stream(c, conns[i], end)
			mu.Lock()
			defer mu.Unlock()
			total += n
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("connload: bulk stream %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return BulkResult{}, firstErr
	}
	secs := time.Since(start).Seconds()
	return BulkResult{Streams: o.Streams, Bytes: total, Seconds: secs, MiBps: float64(total) / secs / (1 << 20)}, nil
}

// stream writes until end, half-closes and reads the echo until the
// server's end of stream; it returns the bytes read back.
func stream(c net.Conn, r io.Reader, end time.Time) (int64, error) {
	werr := make(chan error, 1)
	go func() {
		buf := make([]byte, chunk)
		for time.Now().Before(end) {
			if _, err := c.Write(buf); err != nil {
				werr <- err
				return
			}
		}
		tc, ok := c.(interface{ CloseWrite() error })
		if !ok {
			werr <- errors.New("cannot half-close")
			return
		}
		werr <- tc.CloseWrite()
	}()
	n, err := io.Copy(io.Discard, r)
	if werr := <-werr; werr != nil {
		return n, fmt.Errorf("write: %w", werr)
	}
	if err != nil {
		return n, fmt.Errorf("read: %w", err)
	}
	return n, nil
}
