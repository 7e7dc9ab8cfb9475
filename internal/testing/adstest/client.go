package adstest

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Runner is a delta ADS client such as *adsclient.Client (named by its method
// so the client's own tests can use this package).
type Runner interface {
	Run(ctx context.Context, cc grpc.ClientConnInterface)
}

// Start runs c against the unix socket sock until ctx ends or the test does;
// the test's cleanup waits for c to return. The connection is returned for
// other services on the same socket (ALS).
func Start(ctx context.Context, t testing.TB, sock string, c Runner) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", sock, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, cc)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = cc.Close()
	})
	return cc
}
