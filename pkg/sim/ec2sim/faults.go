package ec2sim

import (
	"math/rand/v2"
	"sync"
	"time"
)

// faults holds the switchable failure modes. It has its own lock so that
// tests can flip faults while requests are in flight.
type faults struct {
	mu           sync.Mutex
	rng          *rand.Rand
	throttle     float64
	serverErrors float64
	exhausted    map[string]bool // subnet ID
	unauthorized map[string]bool // action
	imdsLag      time.Duration
	maxLag       time.Duration // largest lag ever set: how much history to keep
}

// SetThrottle makes the given fraction (0..1) of EC2 requests fail with
// RequestLimitExceeded (HTTP 503), which the SDK retries.
func (s *Sim) SetThrottle(rate float64) {
	s.faults.mu.Lock()
	s.faults.throttle = clamp01(rate)
	s.faults.mu.Unlock()
}

// SetServerErrors makes the given fraction (0..1) of EC2 requests fail with
// InternalError (HTTP 500), which the SDK retries.
func (s *Sim) SetServerErrors(rate float64) {
	s.faults.mu.Lock()
	s.faults.serverErrors = clamp01(rate)
	s.faults.mu.Unlock()
}

// SetSubnetExhausted makes every allocation from the subnet (new ENIs,
// secondary addresses, prefixes, IPv6 addresses and /80s) fail with
// InsufficientFreeAddressesInSubnet, as if other actors had used it up.
// DescribeSubnets then reports 0 available addresses.
func (s *Sim) SetSubnetExhausted(subnetID string, exhausted bool) {
	s.faults.mu.Lock()
	s.faults.exhausted[subnetID] = exhausted
	s.faults.mu.Unlock()
}

// SetUnauthorized makes every request for the action fail with
// UnauthorizedOperation (HTTP 403), as if the IAM policy lacked it.
func (s *Sim) SetUnauthorized(action string, on bool) {
	s.faults.mu.Lock()
	s.faults.unauthorized[action] = on
	s.faults.mu.Unlock()
}

// SetIMDSLag makes IMDS serve the instance's network state as it was d
// ago (0 = current), from a time-stamped history of snapshots. History is
// kept for the largest lag ever set plus one second, so the first call
// with a longer lag shows the oldest kept state until d has passed.
func (s *Sim) SetIMDSLag(d time.Duration) {
	if d < 0 {
		d = 0
	}
	s.faults.mu.Lock()
	s.faults.imdsLag = d
	s.faults.maxLag = max(s.faults.maxLag, d)
	s.faults.mu.Unlock()
}

// pickFault decides, once per request, whether a fault answers it.
func (f *faults) pickFault(action string) *APIError {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.throttle > 0 && f.rng.Float64() < f.throttle {
		return errThrottled()
	}
	if f.serverErrors > 0 && f.rng.Float64() < f.serverErrors {
		return newError(CodeInternalError, "An internal error has occurred")
	}
	if f.unauthorized[action] {
		return newError(CodeUnauthorizedOperation,
			"You are not authorized to perform this operation. User: arn:aws:sts::%s:assumed-role/ec2sim is not authorized to perform: ec2:%s", accountID, action)
	}
	return nil
}

func (f *faults) isExhausted(subnetID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.exhausted[subnetID]
}

func (f *faults) lags() (lag, maxLag time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.imdsLag, f.maxLag
}

func clamp01(v float64) float64 { return min(max(v, 0), 1) }
