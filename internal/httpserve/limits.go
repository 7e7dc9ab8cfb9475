package httpserve

import (
	"time"

	"github.com/aether-mesh/svclb/pkg/contract"
)

// Limits bound what one client may take of a server.
type Limits struct {
	ReadHeaderTimeout time.Duration // request headers, from the first byte
	ReadTimeout       time.Duration // the whole request, body included
	WriteTimeout      time.Duration // from the end of the request's headers to the answer's last byte
	IdleTimeout       time.Duration // a keep-alive connection waiting for its next request
	MaxHeaderBytes    int           // request headers
	MaxConns          int           // connections served at once per listener; 0: no cap
}

// Defaults are the contract's limits, the ones every server of svclb runs with.
func Defaults() Limits {
	return Limits{
		ReadHeaderTimeout: contract.HTTPReadHeaderTimeout,
		ReadTimeout:       contract.HTTPReadTimeout,
		WriteTimeout:      contract.HTTPWriteTimeout,
		IdleTimeout:       contract.HTTPIdleTimeout,
		MaxHeaderBytes:    contract.HTTPMaxHeaderBytes,
		MaxConns:          contract.HTTPMaxConns,
	}
}
