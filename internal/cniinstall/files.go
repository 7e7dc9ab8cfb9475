package cniinstall

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// confExtensions are the files libcni (and so containerd and CRI-O) reads from the conf dir.
var confExtensions = []string{".conf", ".conflist", ".json"}

// ActiveConfig is the file the runtime uses: the first, by name, of the conf dir's network
// configurations.
func ActiveConfig(dir string) (string, error) { return activeConfig(dir, "") }

// activeConfig is ActiveConfig ignoring the file named skip.
func activeConfig(dir, skip string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("cniinstall: read %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && slices.Contains(confExtensions, filepath.Ext(e.Name())) && !strings.HasPrefix(e.Name(), ".") && e.Name() != skip {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("cniinstall: no network configuration in %s yet", dir)
	}
	slices.Sort(names)
	return filepath.Join(dir, names[0]), nil
}

// writeFile replaces path atomically (temp file in the same directory, rename), so the
// runtime never reads half a file, keeping mode.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("cniinstall: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), mode)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("cniinstall: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("cniinstall: replace %s: %w", path, err)
	}
	return nil
}

// copyIfDifferent puts src at dst (mode 0755) unless dst already has its bytes.
func copyIfDifferent(src, dst string) (bool, error) {
	want, err := os.ReadFile(src)
	if err != nil {
		return false, fmt.Errorf("cniinstall: read %s: %w", src, err)
	}
	f, err := os.Open(dst)
	if err == nil {
		have, rerr := io.ReadAll(f)
		f.Close()
		if rerr == nil && bytes.Equal(have, want) {
			return false, nil
		}
	}
	return true, writeFile(dst, want, 0o755)
}
