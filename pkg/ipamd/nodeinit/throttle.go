package nodeinit

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/ctxtime"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/jitter"
)

// Throttle retries at start: when a whole fleet starts together, EC2's
// account-wide request limits can outlast the SDK's three attempts. A node
// that gave up then would restart (the kubelet's crash-loop back-off) and
// ask again from scratch; waiting here, with growing, spread pauses, costs
// fewer requests and starts sooner. Only throttling is retried: any other
// error still stops node init at once.
var (
	throttleFirstPause = time.Second
	throttleMaxPause   = 20 * time.Second
	throttleTries      = 8 // about two minutes of pauses at most
)

// retryThrottled runs f until it returns something other than a throttling
// error, up to throttleTries times.
func retryThrottled[T any](ctx context.Context, log *slog.Logger, what string, f func(context.Context) (T, error)) (T, error) {
	pause := throttleFirstPause
	for try := 1; ; try++ {
		v, err := f(ctx)
		if err == nil || !errors.Is(err, awsutils.ErrThrottled) || try >= throttleTries {
			return v, err
		}
		d := jitter.Spread(pause, 0.5)
		log.Warn("node init: EC2 is throttling; waiting before asking again", "call", what, "try", try, "pause", d.Round(time.Millisecond).String())
		if err := ctxtime.Sleep(ctx, d); err != nil {
			return v, err
		}
		pause = min(2*pause, throttleMaxPause)
	}
}
