package perf

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aether-mesh/svclb/e2e/perf/internal/traffic"
	"github.com/aether-mesh/svclb/fixtures/workload"
)

// attemptTimeout bounds one attempt: through either path a reply takes
// milliseconds; an attempt that hangs does not hold up the next ones.
const attemptTimeout = time.Second

// dial runs perf-client dial-every in client towards to, for at most within
// (untilReply: until the first reply), and returns its stream once the first
// attempt has been reported: the client is dialling.
func dial(ctx context.Context, client *corev1.Pod, to string, within time.Duration, untilReply bool) (*traffic.Stream, error) {
	s := &traffic.Stream{}
	cmd := []string{"/perf-client", "dial-every", "-to=" + to, "-interval=" + cfg.interval.String(),
		"-timeout=" + attemptTimeout.String(), "-within=" + within.String()}
	if untilReply {
		cmd = append(cmd, "-until-reply")
	}
	go func() {
		s.End(suite.cluster.ExecStream(ctx, client.Namespace, client.Name, workload.ClientContainer, s, cmd...))
	}()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if _, done, err := s.Attempts(); done && s.Len() == 0 {
			return false, fmt.Errorf("%s → %s ended before its first attempt: %v", client.Name, to, err)
		}
		return s.Len() > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("client %s dialling %s: %w", client.Name, to, err)
	}
	return s, nil
}
