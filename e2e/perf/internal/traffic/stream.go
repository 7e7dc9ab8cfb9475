package traffic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aether-mesh/svclb/fixtures/echo"
)

// Stream collects one client's attempts as its exec streams them: it is the
// exec's stdout (an io.Writer taking whole or partial lines).
type Stream struct {
	mu      sync.Mutex
	partial []byte
	rs      []echo.Timed
	err     error // a line that did not parse, or how the exec ended
	done    bool
}

// Write takes the next bytes of the client's output.
func (s *Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := bytes.TrimSpace(s.partial[:i])
		s.partial = s.partial[i+1:]
		if len(line) == 0 {
			continue
		}
		var r echo.Timed
		if err := json.Unmarshal(line, &r); err != nil {
			s.err = fmt.Errorf("client line %.200q: %w", line, err)
			return 0, s.err
		}
		s.rs = append(s.rs, r)
	}
}

// End records how the client's exec ended (nil: it ended by itself).
func (s *Stream) End(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	if s.err == nil {
		s.err = err
	}
}

// Attempts are the attempts so far, whether the client has ended, and the
// error it ended with or a line that did not parse.
func (s *Stream) Attempts() (rs []echo.Timed, done bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]echo.Timed(nil), s.rs...), s.done, s.err
}

// Len is how many attempts have been reported.
func (s *Stream) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rs)
}

// Trim forgets the attempts started before t: a long measurement asks only
// about the latest ones, and every question copies what is kept.
func (s *Stream) Trim(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.rs[:0]
	for _, r := range s.rs {
		if !r.Start.Before(t) {
			kept = append(kept, r)
		}
	}
	clear(s.rs[len(kept):])
	s.rs = kept
}
