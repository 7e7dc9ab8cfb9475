package cniinstall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// Installer keeps svclb-cni installed on the node.
type Installer struct {
	ConfDir string         // the host's CNI conf dir, as mounted
	BinDir  string         // the host's CNI bin dir, as mounted
	Source  string         // the plugin binary to copy
	Entry   map[string]any // the conflist entry (see Entry)
	// Interval between checks that the binary and the entry are still there.
	Interval time.Duration
	Log      *slog.Logger
	// Wanted, when set, is asked as Run ends whether the plugin must stay (see
	// InstallerWanted); nil: Run always uninstalls.
	Wanted func(context.Context) (bool, error)
}

// Once copies the binary and writes the installer's own conflist (contract.CNIConfFile): the
// main plugin's conflist with the entry appended, under a name that sorts first, so the
// runtime uses it. The main plugin's file is never written: a main plugin that keeps
// rendering its conflist (flannel's cni-conf sidecar here rewrites it every 5 s when it
// differs) would otherwise fight the installer, and each lost round lets pods start without
// the plugin. A change of the main plugin's file is copied on the next check.
func (in *Installer) Once() error {
	if _, err := copyIfDifferent(in.Source, filepath.Join(in.BinDir, contract.CNIPluginType)); err != nil {
		return err
	}
	src, err := mainConfig(in.ConfDir)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("cniinstall: %w", err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("cniinstall: %w", err)
	}
	out, _, err := Insert(data, in.Entry)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	own := filepath.Join(in.ConfDir, contract.CNIConfFile)
	if have, err := os.ReadFile(own); err == nil && string(have) == string(out) {
		return nil
	}
	if err := writeFile(own, out, st.Mode().Perm()); err != nil {
		return err
	}
	if active, err := ActiveConfig(in.ConfDir); err == nil && active != own {
		return fmt.Errorf("cniinstall: %s sorts before %s: the runtime does not use svclb-cni", active, own)
	}
	in.log().Info("svclb-cni installed", "conflist", own, "from", src)
	return nil
}

// mainConfig is the file the runtime would use without the installer's own.
func mainConfig(dir string) (string, error) {
	return activeConfig(dir, contract.CNIConfFile)
}

// Uninstall deletes the installer's own conflist, takes the entry out of any other conflist
// (an older installer wrote into the main plugin's), and deletes the binary.
func (in *Installer) Uninstall() error {
	if err := os.Remove(filepath.Join(in.ConfDir, contract.CNIConfFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cniinstall: %w", err)
	}
	in.log().Info("svclb-cni removed", "conflist", contract.CNIConfFile)
	entries, err := os.ReadDir(in.ConfDir)
	if err != nil {
		return fmt.Errorf("cniinstall: read %s: %w", in.ConfDir, err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".conflist" {
			continue
		}
		path := filepath.Join(in.ConfDir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out, changed, err := Remove(data)
		if err != nil || !changed {
			continue // not ours to fix
		}
		st, err := os.Stat(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := writeFile(path, out, st.Mode().Perm()); err != nil {
			errs = append(errs, err)
			continue
		}
		in.log().Info("svclb-cni removed", "conflist", path)
	}
	// The binary goes last: a runtime that still lists the plugin must find it.
	if err := os.Remove(filepath.Join(in.BinDir, contract.CNIPluginType)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Run installs, re-installs whenever the binary or the entry went missing, and when ctx ends
// uninstalls unless Wanted says the plugin must stay. ready is called after the first
// successful install.
func (in *Installer) Run(ctx context.Context, ready func()) error {
	interval := in.Interval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	installed := false
	for {
		// The main plugin's DaemonSet may not have written its conflist yet, or may rewrite
		// it at any time: polling is the signal here (what changed is a file on the host).
		if err := in.Once(); err != nil {
			in.log().Warn("svclb-cni not installed yet", "error", err)
		} else if !installed {
			installed = true
			if ready != nil {
				ready()
			}
		}
		select {
		case <-ctx.Done():
			return in.stop()
		case <-t.C:
		}
	}
}

// stop uninstalls, unless the plugin is still wanted.
func (in *Installer) stop() error {
	if in.Wanted != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		wanted, err := in.Wanted(ctx)
		if err != nil {
			in.log().Warn("could not tell whether svclb-cni is still wanted; keeping it", "error", err)
		}
		if wanted {
			in.log().Info("svclb-cni stays installed: the DaemonSet still runs the installer (an update, a drain)")
			return nil
		}
	}
	return in.Uninstall()
}

func (in *Installer) log() *slog.Logger {
	if in.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Log
}
