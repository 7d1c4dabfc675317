package e2e

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Churn creates and deletes pods with a few concurrent workers, the way a
// busy node's kubelet does. Each worker keeps a handful of its pods alive
// and deletes a random one of them once it holds more than its current
// limit. Creates that fail (ipamd down, pool empty) are retried after a
// short pause and counted.
type Churn struct {
	Node    *Node
	Workers int
	MaxLive int // per worker; the live count wanders between 1 and MaxLive
	Prefix  string
	// DeleteHook, when set, wraps each delete (the soak uses it to take
	// ipamd down for some deletes).
	DeleteHook func(del func() error) error

	Creates, CreateFailures, Deletes, DeleteFailures atomic.Int64
	Latency                                          Latencies

	mu   sync.Mutex
	live map[*Pod]bool
	// owned[w] are worker w's live pods; they carry over to the next Run.
	owned [][]*Pod
}

// Run churns until ctx ends or total pods were created (0: no limit).
// Pods alive at the end stay alive (see Live).
func (c *Churn) Run(ctx context.Context, total int64) {
	c.mu.Lock()
	if c.live == nil {
		c.live = map[*Pod]bool{}
	}
	for len(c.owned) < c.Workers {
		c.owned = append(c.owned, nil)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for w := 0; w < c.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.mu.Lock()
			mine := c.owned[w]
			c.mu.Unlock()
			mine = c.worker(ctx, total, rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano()))), mine)
			c.mu.Lock()
			c.owned[w] = mine
			c.mu.Unlock()
		}()
	}
	wg.Wait()
}

// worker churns, starting from (and returning) its live pods.
func (c *Churn) worker(ctx context.Context, total int64, rng *rand.Rand, mine []*Pod) []*Pod {
	limit := 1 + rng.IntN(c.MaxLive)
	for ctx.Err() == nil {
		if total > 0 && c.Creates.Load() >= total {
			return mine
		}
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		p, err := c.Node.RunPod(cctx, c.Node.NextName(c.Prefix))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return mine
			}
			c.CreateFailures.Add(1)
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		c.Creates.Add(1)
		c.Latency.Add(p.CreateTook)
		c.mu.Lock()
		c.live[p] = true
		c.mu.Unlock()
		mine = append(mine, p)
		for len(mine) > limit && ctx.Err() == nil {
			i := rng.IntN(len(mine))
			victim := mine[i]
			del := func() error {
				dctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				return c.Node.DeletePod(dctx, victim)
			}
			var err error
			if c.DeleteHook != nil {
				err = c.DeleteHook(del)
			} else {
				err = del()
			}
			if err != nil {
				c.DeleteFailures.Add(1)
				sleepCtx(ctx, 200*time.Millisecond)
				continue
			}
			c.Deletes.Add(1)
			c.mu.Lock()
			delete(c.live, victim)
			c.mu.Unlock()
			mine = append(mine[:i], mine[i+1:]...)
			limit = 1 + rng.IntN(c.MaxLive)
		}
	}
	return mine
}

// Live lists the churn's pods that are alive.
func (c *Churn) Live() []*Pod {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Pod, 0, len(c.live))
	for p := range c.live {
		out = append(out, p)
	}
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Chaos kills ipamd (SIGKILL) at random moments until ctx ends, bringing
// it back after a short random pause each time. It returns the number of
// kills; a failed restart is reported through fail. mu (may be nil) is
// held from each kill to the restart, for callers that also stop ipamd.
func Chaos(ctx context.Context, p *IPAMD, mu sync.Locker, every, down [2]time.Duration, rng *rand.Rand, fail func(error)) int {
	if mu == nil {
		mu = &sync.Mutex{}
	}
	kills := 0
	between := func(r [2]time.Duration) time.Duration {
		return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])+1))
	}
	for {
		sleepCtx(ctx, between(every))
		if ctx.Err() != nil {
			return kills
		}
		mu.Lock()
		err := p.Kill()
		if err == nil {
			kills++
			time.Sleep(between(down))
			err = p.Start()
		}
		mu.Unlock()
		if err != nil {
			fail(err)
			return kills
		}
	}
}
