package awsutils

import (
	"context"
	"errors"
	"fmt"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"golang.org/x/time/rate"
)

// Defaults of the node's EC2 request budget (EC2_API_RATE_LIMIT and
// EC2_API_BURST). A node's start needs about ten requests (instance ENIs,
// subnets, an address assignment, one ENI's create, attach and
// DeleteOnTermination), so a burst of 20 covers a start with a retry of
// each; 2 a second sustained is far above what a churning node needs and
// caps what a fault loop on one node can take from the account's buckets.
const (
	DefaultEC2CallsPerSecond = 2.0
	DefaultEC2Burst          = 20
)

// Budget is the client-side limit on EC2 requests: every attempt (the
// SDK's retries included) takes a token from one bucket for the whole
// node. The zero value means the defaults.
type Budget struct {
	CallsPerSecond float64
	Burst          int
}

func (b Budget) withDefaults() Budget {
	if b.CallsPerSecond <= 0 {
		b.CallsPerSecond = DefaultEC2CallsPerSecond
	}
	if b.Burst <= 0 {
		b.Burst = DefaultEC2Burst
	}
	return b
}

// budgetMiddlewareID names the budget in the SDK's stack. It sits in the
// finalize step after the retry middleware, so each attempt waits for its
// own token and a throttled answer is seen per attempt.
const budgetMiddlewareID = "EC2RequestBudget"

// addBudget returns the stack option that makes every EC2 attempt wait
// for a token of l and counts the attempts EC2 throttled.
func addBudget(l *rate.Limiter) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		mw := middleware.FinalizeMiddlewareFunc(budgetMiddlewareID,
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				op := awsmiddleware.GetOperationName(ctx)
				if err := waitBudget(ctx, l); err != nil {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, fmt.Errorf("ec2 %s: %w", op, err)
				}
				out, md, err := next.HandleFinalize(ctx, in)
				if isThrottle(err) {
					ec2Throttled.WithLabelValues(op).Inc()
				}
				return out, md, err
			})
		return stack.Finalize.Insert(mw, "Retry", middleware.After)
	}
}

// waitBudget takes one token, counting the requests that had to wait and
// for how long.
func waitBudget(ctx context.Context, l *rate.Limiter) error {
	r := l.Reserve()
	if !r.OK() {
		return errors.New("EC2 request budget: burst is zero")
	}
	d := r.Delay()
	if d <= 0 {
		return nil
	}
	budgetWaits.Inc()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		budgetWaitSeconds.Add(d.Seconds())
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}

// isThrottle reports whether EC2 answered with a throttling code.
func isThrottle(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	return errors.Is(codeClass[ae.ErrorCode()], ErrThrottled)
}
