package cniinstall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// Insert appends entry (a plugin configuration whose "type" is contract.CNIPluginType) to the
// conflist's plugins, replacing an earlier copy of it wherever that was: the plugin is chained,
// so it must run last. changed is false when the conflist already ends with entry.
func Insert(conflist []byte, entry map[string]any) (out []byte, changed bool, err error) {
	list, plugins, err := parse(conflist)
	if err != nil {
		return nil, false, err
	}
	if n := len(plugins); n > 0 && isOurs(plugins[n-1]) && reflect.DeepEqual(plugins[n-1], normalize(entry)) && count(plugins) == 1 {
		return conflist, false, nil
	}
	kept := withoutOurs(plugins)
	if len(kept) == 0 {
		return nil, false, fmt.Errorf("cniinstall: the conflist has no plugin to chain after")
	}
	list["plugins"] = append(kept, normalize(entry))
	out, err = encode(list)
	return out, true, err
}

// Remove takes every svclb-cni entry out of the conflist; changed is false when there was none.
func Remove(conflist []byte) (out []byte, changed bool, err error) {
	list, plugins, err := parse(conflist)
	if err != nil {
		return nil, false, err
	}
	if count(plugins) == 0 {
		return conflist, false, nil
	}
	list["plugins"] = withoutOurs(plugins)
	out, err = encode(list)
	return out, true, err
}

// Entry is the plugin's conflist entry.
func Entry(agentSocket, timeout string, excludeNamespaces []string) map[string]any {
	e := map[string]any{"type": contract.CNIPluginType, "agentSocket": agentSocket}
	if timeout != "" {
		e["timeout"] = timeout
	}
	if len(excludeNamespaces) > 0 {
		e["excludeNamespaces"] = excludeNamespaces
	}
	return e
}

func parse(conflist []byte) (map[string]any, []any, error) {
	var list map[string]any
	d := json.NewDecoder(bytes.NewReader(conflist))
	d.UseNumber() // keep numbers (an MTU, a port) as written
	if err := d.Decode(&list); err != nil {
		return nil, nil, fmt.Errorf("cniinstall: conflist is not a JSON object: %w", err)
	}
	raw, ok := list["plugins"]
	if !ok {
		return nil, nil, fmt.Errorf("cniinstall: not a conflist (no \"plugins\"): a single-plugin .conf is not supported")
	}
	plugins, ok := raw.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("cniinstall: conflist \"plugins\" is not a list")
	}
	return list, plugins, nil
}

func isOurs(p any) bool {
	m, ok := p.(map[string]any)
	return ok && m["type"] == contract.CNIPluginType
}

func count(plugins []any) int {
	n := 0
	for _, p := range plugins {
		if isOurs(p) {
			n++
		}
	}
	return n
}

func withoutOurs(plugins []any) []any {
	out := make([]any, 0, len(plugins))
	for _, p := range plugins {
		if !isOurs(p) {
			out = append(out, p)
		}
	}
	return out
}

// normalize gives entry the shape parse produces, so DeepEqual compares like with like.
func normalize(entry map[string]any) any {
	b, err := json.Marshal(entry)
	if err != nil {
		panic(err) // entries are built from strings and string slices
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	_ = d.Decode(&v)
	return v
}

func encode(list map[string]any) ([]byte, error) {
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("cniinstall: encode conflist: %w", err)
	}
	return append(b, '\n'), nil
}
