package enroll

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/internal/capture"
)

// WaitListening polls until a TCP socket listens on port in the netns at path, or ctx ends.
// It is how an agent knows the pod's capture listener is up (the proxy bound it).
func WaitListening(ctx context.Context, path string, port uint16, interval time.Duration) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) {
		ok, err := capture.ListeningIn(path, port)
		last = err // the netns may not be readable yet; keep polling, report it at the end
		return ok, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("no listener on port %d in %s: %w (last: %v)", port, path, context.Cause(ctx), last)
		}
		return fmt.Errorf("no listener on port %d in %s: %w", port, path, context.Cause(ctx))
	}
	return nil
}
