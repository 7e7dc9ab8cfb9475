// The demand file: the admitted on-demand names persisted across restarts.

package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// demandFileVersion is the "version" of the demand file format.
const demandFileVersion = 1

// demandFile is the on-disk form of the admitted set.
type demandFile struct {
	Version  int      `json:"version"`
	Clusters []string `json:"clusters"`
}

// loadDemandFile reads the admitted names a previous run saved. A missing file is an empty
// demand; a file that does not parse is renamed to <file>.corrupt (kept for a post-mortem, out
// of the way of the next save) and the error says so.
func loadDemandFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read demand file: %w", err)
	}
	var f demandFile
	err = json.Unmarshal(b, &f)
	if err == nil && f.Version != demandFileVersion {
		err = fmt.Errorf("version %d, want %d", f.Version, demandFileVersion)
	}
	if err != nil {
		if rerr := os.Rename(path, path+".corrupt"); rerr != nil {
			return nil, fmt.Errorf("demand file %s does not parse (%w) and could not be moved aside: %w", path, err, rerr)
		}
		return nil, fmt.Errorf("demand file %s does not parse, moved to %s.corrupt: %w", path, path, err)
	}
	return f.Clusters, nil
}

// saveDemandFile writes names atomically: a reader (or a crash) sees the old file or the new
// one, never a torn write.
func saveDemandFile(path string, names []string) (err error) {
	slices.Sort(names)
	b, err := json.Marshal(demandFile{Version: demandFileVersion, Clusters: names})
	if err != nil {
		return fmt.Errorf("encode demand file: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demand file directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("demand file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write demand file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync demand file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close demand file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace demand file: %w", err)
	}
	// The rename is durable only once the directory is synced.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// restoreDemand loads the demand file for the first sync to re-classify. Call it after the
// informer caches synced and before the first sync, so that snapshot already carries them.
func (s *syncer) restoreDemand() {
	if s.demand.file == "" {
		return
	}
	names, err := loadDemandFile(s.demand.file)
	if err != nil {
		s.log.Error("starting with no on-demand clusters", "error", err)
		return
	}
	s.mu.Lock()
	s.restored = names
	s.mu.Unlock()
}

// saveDemand writes the admitted set if it changed; a failure is retried after the next sync.
func (s *syncer) saveDemand() {
	d := s.demand
	if !d.changed || d.file == "" {
		return
	}
	names := make([]string, 0, len(d.admitted))
	for n := range d.admitted {
		names = append(names, n)
	}
	if err := saveDemandFile(d.file, names); err != nil {
		s.log.Error("could not save on-demand clusters; retrying after the next sync", "file", d.file, "error", err)
		return
	}
	d.changed = false
}
