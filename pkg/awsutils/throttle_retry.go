package awsutils

import (
	"context"
	"errors"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/ctxtime"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/jitter"
)

// Steps of AllocENI after the ENI exists (attach, DeleteOnTermination)
// are retried when EC2 throttles them beyond the SDK's attempts: giving
// up would delete the new ENI, and making it again costs a
// CreateNetworkInterface, the scarcest of the account's request tokens
// (EC2 refills five a second) when a fleet starts.
var (
	stepRetryFirst = 2 * time.Second
	stepRetryMax   = 8 * time.Second
	stepRetries    = 3
)

// retryThrottledStep runs f again after a spread, growing pause while EC2
// throttles it, at most stepRetries more times; any other outcome returns.
func retryThrottledStep[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	pause := stepRetryFirst
	for try := 0; ; try++ {
		v, err := f(ctx)
		if err == nil || !errors.Is(err, ErrThrottled) || try >= stepRetries {
			return v, err
		}
		if serr := ctxtime.Sleep(ctx, jitter.Spread(pause, 0.5)); serr != nil {
			return v, err
		}
		pause = min(2*pause, stepRetryMax)
	}
}
