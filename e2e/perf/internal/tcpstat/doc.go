// Package tcpstat reads a network namespace's TCP counters: the kernel's
// /proc/net/snmp ("Tcp:") and /proc/net/netstat ("TcpExt:") tables, which
// `nstat` reads too, keyed "Tcp.RetransSegs", "TcpExt.ListenOverflows". The
// data-plane run reads them in the client pod (perf-client tcpstat) around
// each path's open loop, so a failed or slow connection can be put down to a
// SYN the listener dropped, a retransmission or a timeout, not guessed at.
package tcpstat
