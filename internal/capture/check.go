package capture

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

// chains are the capture table's chains, each holding rules once installed.
var chains = []string{"output", "prerouting", "input"}

// inventory is what of Install's capture a namespace holds.
type inventory struct {
	rule, route, table bool
	// rules counts the rules of each chain present (absent: no such chain).
	rules map[string]int
}

// Check reports an error naming the first piece of Install's capture missing from the
// namespace of cfg: the policy rule, the local route, or the table and its three chains.
func Check(cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	inv, err := read(cfg)
	if err != nil {
		return err
	}
	if !inv.rule {
		return fmt.Errorf("capture: no rule fwmark %#x lookup %d", cfg.Mark, cfg.RouteTable)
	}
	if !inv.route {
		return fmt.Errorf("capture: no route local 0.0.0.0/0 dev lo table %d", cfg.RouteTable)
	}
	var errs []error
	for _, name := range chains {
		n, ok := inv.rules[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("capture: no chain ip %s %s", TableName, name))
		case n == 0:
			errs = append(errs, fmt.Errorf("capture: chain ip %s %s is empty", TableName, name))
		}
	}
	return errors.Join(errs...)
}

// Remains names every piece of Install's capture still in the namespace of cfg (none after
// Uninstall): the policy rule, the local route, the table.
func Remains(cfg Config) ([]string, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	inv, err := read(cfg)
	if err != nil {
		return nil, err
	}
	var out []string
	if inv.rule {
		out = append(out, fmt.Sprintf("rule fwmark %#x lookup %d", cfg.Mark, cfg.RouteTable))
	}
	if inv.route {
		out = append(out, fmt.Sprintf("route local 0.0.0.0/0 dev lo table %d", cfg.RouteTable))
	}
	if inv.table {
		out = append(out, "table ip "+TableName)
	}
	return out, nil
}

// read takes the inventory of the namespace of cfg.
func read(cfg Config) (inventory, error) {
	inv := inventory{rules: map[string]int{}}
	h, err := openHandles(cfg.NetNSPath)
	if err != nil {
		return inv, err
	}
	defer h.close()
	rules, err := findRules(h.link, cfg)
	if err != nil {
		return inv, err
	}
	inv.rule = len(rules) > 0
	lo, err := h.link.LinkByName("lo")
	if err != nil {
		return inv, fmt.Errorf("capture: find lo: %w", err)
	}
	want := localRoute(cfg, lo.Attrs().Index)
	routes, err := h.link.RouteListFiltered(0, want, netlink.RT_FILTER_TABLE)
	if err != nil {
		return inv, fmt.Errorf("capture: list routes of table %d: %w", cfg.RouteTable, err)
	}
	for _, r := range routes {
		if r.Type == want.Type && r.LinkIndex == want.LinkIndex && r.Dst != nil && r.Dst.String() == want.Dst.String() {
			inv.route = true
		}
	}
	tables, err := h.nft.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return inv, fmt.Errorf("capture: list tables: %w", err)
	}
	for _, t := range tables {
		inv.table = inv.table || t.Name == TableName
	}
	if !inv.table {
		return inv, nil
	}
	cs, err := h.nft.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return inv, fmt.Errorf("capture: list chains: %w", err)
	}
	for _, c := range cs {
		if c.Table.Name != TableName {
			continue
		}
		rs, err := h.nft.GetRules(c.Table, c)
		if err != nil {
			return inv, fmt.Errorf("capture: rules of ip %s %s: %w", TableName, c.Name, err)
		}
		inv.rules[c.Name] = len(rs)
	}
	return inv, nil
}
