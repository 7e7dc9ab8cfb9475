package scaleresult

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// MaxFileBytes bounds a result file Read takes: a run of the default steps or levels writes a
// few KB, so a file this large is not one of these results.
const MaxFileBytes = 4 << 20

// Results are the envtest scale results found in a perf results directory: nil where a test
// has not run (its file is absent).
type Results struct {
	Growth   *Growth
	Held     *Held
	OnDemand *OnDemand
	// Unread holds, by file name, each file that is there but could not be read (too large,
	// not JSON, not this result's fields): its result stays nil.
	Unread map[string]error
}

// Read reads GrowthFile, HeldFile and OnDemandFile from dir, whichever exist; one it cannot read
// is kept in Unread and the others are still read.
func Read(dir string) *Results {
	r := &Results{Unread: map[string]error{}}
	unread := func(name string, err error) {
		if err != nil {
			r.Unread[name] = err
		}
	}
	var err error
	r.Growth, err = readFile[Growth](dir, GrowthFile)
	unread(GrowthFile, err)
	r.Held, err = readFile[Held](dir, HeldFile)
	unread(HeldFile, err)
	r.OnDemand, err = readFile[OnDemand](dir, OnDemandFile)
	unread(OnDemandFile, err)
	return r
}

// readFile decodes dir/name, nil if it does not exist. Every field must be one of T's: a file
// of another result, or of another shape, is an error rather than a result of zeros.
func readFile[T any](dir, name string) (*T, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB: not a scale result", name, MaxFileBytes>>20)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	v := new(T)
	if err := d.Decode(v); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%s: more after the result's JSON", name)
	}
	return v, nil
}
