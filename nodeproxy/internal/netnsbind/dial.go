package netnsbind

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// DialTCP connects to raddr from a socket created inside the namespace at
// nsPath, bound to laddr when it is valid. Only socket(2) runs in the
// namespace (a socket keeps the namespace it was created in); the bind, the
// control function and the connect run on the caller's thread, and the
// handshake waits in Go's netpoller. Envoy does the same for an upstream
// whose source address names a namespace: source/common/event/dispatcher_impl.cc,
// DispatcherImpl::createClientConnection creates the connection (its socket)
// inside Network::Utility::execInNetworkNamespace and the connection pool
// connects it afterwards. Entering the namespace for the whole dial, as Do
// would, holds a locked OS thread for every handshake in flight.
//
// control, if not nil, runs on the socket before the bind (SO_MARK). timeout
// bounds the handshake (0: none); a handshake that does not finish within it is
// a net.Error whose Timeout() is true. The returned connection's RemoteAddr is
// nil: net.FileConn reads the peer before the handshake ends.
func DialTCP(nsPath string, laddr, raddr netip.AddrPort, timeout time.Duration, control func(fd int) error) (*net.TCPConn, error) {
	opErr := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Source: tcpAddr(laddr), Addr: tcpAddr(raddr), Err: err}
	}
	family := unix.AF_INET
	if !raddr.Addr().Unmap().Is4() {
		family = unix.AF_INET6
	}
	fd := -1
	if err := Do(nsPath, func() error {
		var err error
		fd, err = unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		return os.NewSyscallError("socket", err)
	}); err != nil {
		if fd >= 0 { // made, but the thread could not leave the namespace
			_ = unix.Close(fd)
		}
		return nil, opErr(fmt.Errorf("in %s: %w", nsPath, err))
	}
	// f owns fd until net.FileConn has its own duplicate.
	f := os.NewFile(uintptr(fd), "tcp")
	defer f.Close()
	if control != nil {
		if err := control(fd); err != nil {
			return nil, opErr(err)
		}
	}
	if laddr.IsValid() {
		if err := unix.Bind(fd, sockaddr(family, laddr)); err != nil {
			return nil, opErr(os.NewSyscallError("bind", err))
		}
	}
	switch err := unix.Connect(fd, sockaddr(family, raddr)); {
	case err == nil, errors.Is(err, unix.EINPROGRESS), errors.Is(err, unix.EINTR):
	default:
		return nil, opErr(os.NewSyscallError("connect", err))
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, opErr(err)
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, opErr(fmt.Errorf("not a TCP connection: %T", c))
	}
	if err := awaitConnect(tc, timeout); err != nil {
		tc.Close()
		return nil, opErr(err)
	}
	return tc, nil
}

// awaitConnect waits in the netpoller until the non-blocking connect of c
// ends, as net.(*netFD).connect does: writable, then SO_ERROR says how.
func awaitConnect(c *net.TCPConn, timeout time.Duration) error {
	if timeout > 0 {
		if err := c.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		defer c.SetWriteDeadline(time.Time{}) //nolint:errcheck // the connection is closed on any error
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var connErr error
	if err := rc.Write(func(fd uintptr) bool {
		v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			connErr = os.NewSyscallError("getsockopt", err)
			return true
		}
		switch e := unix.Errno(v); e {
		case unix.EINPROGRESS, unix.EALREADY, unix.EINTR:
			return false
		case 0, unix.EISCONN:
			// Writable with no error can be spurious; connected once the peer is known.
			_, err := unix.Getpeername(int(fd))
			return err == nil
		default:
			connErr = os.NewSyscallError("connect", e)
			return true
		}
	}); err != nil {
		return err // os.ErrDeadlineExceeded at the timeout: a net.Error, Timeout() true
	}
	return connErr
}

func sockaddr(family int, a netip.AddrPort) unix.Sockaddr {
	if family == unix.AF_INET {
		return &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().Unmap().As4()}
	}
	return &unix.SockaddrInet6{Port: int(a.Port()), Addr: a.Addr().As16()}
}

func tcpAddr(a netip.AddrPort) net.Addr {
	if !a.IsValid() {
		return nil
	}
	return net.TCPAddrFromAddrPort(a)
}
