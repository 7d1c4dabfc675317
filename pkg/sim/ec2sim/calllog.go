package ec2sim

import (
	"sync"
	"time"
)

// Call is one EC2 request as the simulator answered it.
type Call struct {
	Time      time.Time
	Action    string // as sent, even when unknown
	ErrorCode string // "" on success
	// Attempt is the SDK's attempt number from the Amz-Sdk-Request header
	// (1 = first try, 2+ = retries), 0 when the client did not send it.
	Attempt int
}

// callLog records every EC2 request, including failed, throttled and
// rejected ones.
type callLog struct {
	mu    sync.Mutex
	calls []Call
}

func (l *callLog) add(c Call) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

// Calls returns the number of EC2 requests per action, including failed
// and throttled attempts (each SDK retry is its own request).
func (s *Sim) Calls() map[string]int {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	out := make(map[string]int)
	for _, c := range s.log.calls {
		out[c.Action]++
	}
	return out
}

// CallLog returns a copy of every EC2 request in arrival order.
func (s *Sim) CallLog() []Call {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return append([]Call(nil), s.log.calls...)
}

// ResetCalls empties the call log.
func (s *Sim) ResetCalls() {
	s.log.mu.Lock()
	s.log.calls = nil
	s.log.mu.Unlock()
}
