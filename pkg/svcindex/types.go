package svcindex

import (
	"log/slog"
	"net/netip"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// Class is what a destination is. The zero value is External.
type Class uint8

const (
	// External: the address is outside the Service range (or the range is unknown).
	External Class = iota
	// NoService: the address is inside the Service range and no Service owns it.
	NoService
	// PortNotDeclared: the address is a Service's ClusterIP, the port is not one of its TCP ports.
	PortNotDeclared
	// Known: a TCP port of a Service.
	Known
)

// String returns the names used in refusal reasons and logs.
func (c Class) String() string {
	switch c {
	case External:
		return contract.ReasonExternal
	case NoService:
		return contract.ReasonNoService
	case PortNotDeclared:
		return contract.ReasonPortNotDeclared
	case Known:
		return "known"
	}
	return "unknown"
}

// ServicePort is one TCP port of a Service, addressed by its IPv4 ClusterIP.
type ServicePort struct {
	Service    types.NamespacedName
	ClusterIP  netip.Addr // IPv4
	Port       uint16     // TCP
	PortName   string
	TargetPort intstr.IntOrString
}

// Result is the answer of Lookup.
type Result struct {
	Class   Class
	Service types.NamespacedName // set for Known and PortNotDeclared
	Port    ServicePort          // set for Known
}

// Options tune New.
type Options struct {
	// RangeOverride replaces the ServiceCIDR part of the range when non-empty
	// (ServiceImport /32s are still added). ServiceCIDRs are then not watched.
	// IPv6 prefixes are ignored like IPv6 ServiceCIDRs.
	RangeOverride []netip.Prefix
	// Logger receives state changes (Info) and per-object detail (Debug).
	// Nil means slog.Default().
	Logger *slog.Logger
}
