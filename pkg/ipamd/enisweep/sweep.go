package enisweep

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/ctxtime"
)

// Upstream's timings.
const (
	DefaultPeriod        = time.Hour
	DefaultMaxStartDelay = 300 * time.Second
	DefaultGrace         = 5 * time.Minute
)

// FnDeleteErr is the fn label upstream counts a failed delete under
// (awscni_aws_utils_error_count).
const FnDeleteErr = "cleanUpLeakedENIDeleteErr"

// EC2 is what the sweep needs from EC2; *awsutils.Client satisfies it.
type EC2 interface {
	DetachedTaggedENIs(ctx context.Context) ([]awsutils.ENI, error)
	TagENI(ctx context.Context, eniID string, tags map[string]string) error
	DeleteENI(ctx context.Context, eniID string) error
}

var _ EC2 = (*awsutils.Client)(nil)

// Config tunes the sweep; zero values take upstream's.
type Config struct {
	Period time.Duration // between the end of one pass and the next run (1 h)
	// MaxStartDelay: each run first waits a random time in [0, this) (300 s),
	// so the nodes of a cluster do not all sweep at once. Negative: none.
	MaxStartDelay time.Duration
	// StartDelay picks the delay in [0, max); default uniformly random.
	StartDelay func(max time.Duration) time.Duration
	Grace      time.Duration    // an ENI younger than this is kept (5 min)
	Now        func() time.Time // default time.Now
	Log        *slog.Logger     // default: discard
	// CountError counts a failed delete (fn is FnDeleteErr); nil: only
	// logged.
	CountError func(fn string, err error)
}

// Sweeper runs the sweep.
type Sweeper struct {
	cfg Config
	ec2 EC2
}

// New returns a sweeper; Run drives it, Pass runs one pass.
func New(cfg Config, ec2 EC2) *Sweeper {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.MaxStartDelay == 0 {
		cfg.MaxStartDelay = DefaultMaxStartDelay
	}
	if cfg.StartDelay == nil {
		cfg.StartDelay = rand.N[time.Duration]
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{cfg: cfg, ec2: ec2}
}

// Run sweeps until ctx ends: a random start delay, a pass, the period,
// and again.
func (s *Sweeper) Run(ctx context.Context) {
	for {
		if s.cfg.MaxStartDelay > 0 && ctxtime.Sleep(ctx, s.cfg.StartDelay(s.cfg.MaxStartDelay)) != nil {
			return
		}
		s.Pass(ctx)
		if ctxtime.Sleep(ctx, s.cfg.Period) != nil {
			return
		}
	}
}

// Result counts what one pass did.
type Result struct {
	Candidates int // detached ENIs with the tags
	Deleted    int
	Stamped    int // createdAt added; deleted in a later pass
	Kept       int // younger than the grace period, or not ipamd's
	Failed     int // listing, tagging or deleting failed
}

// Pass runs one sweep now.
func (s *Sweeper) Pass(ctx context.Context) Result {
	var r Result
	enis, err := s.ec2.DetachedTaggedENIs(ctx)
	if err != nil {
		r.Failed++
		s.cfg.Log.Warn("leaked-ENI sweep: could not list detached ENIs; trying again next time", "error", err)
		return r
	}
	r.Candidates = len(enis)
	now := s.cfg.Now()
	for _, e := range enis {
		switch act, why := Decide(e, now, s.cfg.Grace); act {
		case Keep:
			r.Kept++
			if why != "" {
				s.cfg.Log.Warn("leaked-ENI sweep: keeping ENI", "eni", e.ID, "why", why)
			}
		case Stamp:
			err := s.ec2.TagENI(ctx, e.ID, map[string]string{awsutils.TagCreatedAt: now.UTC().Format(time.RFC3339)})
			if err != nil {
				r.Failed++
				s.cfg.Log.Warn("leaked-ENI sweep: could not tag ENI with createdAt", "eni", e.ID, "error", err)
				continue
			}
			r.Stamped++
			s.cfg.Log.Info("leaked-ENI sweep: detached ENI had no createdAt; stamped it, deleting it once it is old enough", "eni", e.ID)
		case Delete:
			if err := s.ec2.DeleteENI(ctx, e.ID); err != nil {
				r.Failed++
				if s.cfg.CountError != nil {
					s.cfg.CountError(FnDeleteErr, err)
				}
				s.cfg.Log.Warn("leaked-ENI sweep: could not delete leaked ENI", "eni", e.ID, "error", err)
				continue
			}
			r.Deleted++
			s.cfg.Log.Info("leaked-ENI sweep: deleted leaked ENI", "eni", e.ID, "createdAt", e.Tags[awsutils.TagCreatedAt])
		}
	}
	if r.Candidates > 0 || r.Failed > 0 {
		s.cfg.Log.Info("leaked-ENI sweep done", "candidates", r.Candidates, "deleted", r.Deleted,
			"stamped", r.Stamped, "kept", r.Kept, "failed", r.Failed)
	}
	return r
}

// Action is what the sweep does with one detached, tagged ENI.
type Action int

const (
	Keep   Action = iota // not ipamd's, too young, or its createdAt is unreadable
	Stamp                // no createdAt: add one now, decide next pass
	Delete               // leaked
)

// Decide says what to do with a detached ENI carrying ipamd's tags, as
// upstream decides; why explains a Keep worth a warning ("" otherwise).
func Decide(e awsutils.ENI, now time.Time, grace time.Duration) (Action, string) {
	if !strings.HasPrefix(e.Description, awsutils.ENIDescriptionPrefix) {
		return Keep, ""
	}
	v, ok := e.Tags[awsutils.TagCreatedAt]
	if !ok {
		return Stamp, ""
	}
	created, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return Keep, "createdAt tag " + strconv.Quote(v) + " is not an RFC 3339 time"
	}
	if now.Sub(created) < grace {
		return Keep, ""
	}
	return Delete, ""
}
