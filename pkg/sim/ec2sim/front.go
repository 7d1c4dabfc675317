package ec2sim

import "time"

// front is what a node's EC2 requests pass before they reach its model:
// the request limits and latency of the account the node belongs to, and
// the account's aggregate tally. A standalone Sim has a private front
// made from its Config. A front is never changed once requests flow.
type front struct {
	limiter *limiter // nil: no request limits
	latency latencies
	tally   *tally // the account's; nil for a standalone Sim
	requestIDs
}

func newFront(throttle *ThrottleConfig, latency time.Duration, perAction map[string]time.Duration, t *tally) *front {
	f := &front{latency: newLatencies(latency, perAction), tally: t}
	if throttle != nil {
		f.limiter = newLimiter(throttle, time.Now)
	}
	return f
}
