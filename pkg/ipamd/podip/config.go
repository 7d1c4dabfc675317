package podip

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// Mode says what the pod-IP reconciler may do.
type Mode string

// Modes of POD_IP_RECONCILE_MODE.
const (
	Enforce Mode = "enforce" // free confirmed leaks, re-adopt live IPs
	Report  Mode = "report"  // only log, count and post events
	Off     Mode = "off"
)

// Config tunes the pod-IP reconciler.
type Config struct {
	Mode Mode
	// Interval between passes (POD_IP_RECONCILE_INTERVAL, 1m).
	Interval time.Duration
	// Grace: an allocation younger than this is never a candidate, because
	// runtimes list a sandbox only after its CNI ADD returned
	// (POD_IP_RECONCILE_GRACE_PERIOD, 5m).
	Grace time.Duration
	// StartDelay is when the first pass runs after start (10s).
	StartDelay time.Duration
	// MinTriggerGap is the least time between two passes when triggered
	// (2s): the trigger's minimum interval.
	MinTriggerGap time.Duration
	// MaxReleasePerPass or MaxReleasePercent (of the pool's addresses, at
	// least 1) caps what every pass frees, and every path until the next
	// pass (POD_IP_RECONCILE_MAX_RELEASE_PER_PASS: a number or "N%").
	// Unset (both 0): releases the runtime vouches for one by one are not
	// capped, and one that proceeds after a hold frees at most 10% per
	// pass.
	MaxReleasePerPass, MaxReleasePercent int
	// PodName is ipamd's own pod (MY_POD_NAME): a list naming it comes
	// from the runtime that runs this node's pods. Empty: not known.
	PodName string
	// CRIEndpoint is CRI_RUNTIME_ENDPOINT (empty: probe the usual sockets).
	CRIEndpoint string
	// CRITimeout bounds each CRI call (5s).
	CRITimeout time.Duration
	// NetworkCard is the network card whose datastore the reconciler keeps
	// (0: the agent's own). Above 0 the runtime's IPs do not cover the
	// card: it reports a multi-NIC pod's first interface only (inuse.go).
	NetworkCard int
	// Interfaces, on a card above 0, is what card 0's datastore records of
	// a sandbox: whether it holds an allocation for the sandbox ID, and
	// the most interfaces (InterfacesCount) such an allocation names. It
	// corroborates a sandbox's multi-NIC annotation (cardcover.go); nil
	// trusts the annotation alone.
	Interfaces func(sandboxID string) (held bool, count int)
	// NetworkName and IfName form the key of a re-adopted address: what the
	// runtime passes to aws-cni (the conflist name and CNI_IFNAME).
	NetworkName, IfName string
}

// SetDefaults fills every unset field with its default.
func (c *Config) SetDefaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.Interval, time.Minute)
	set(&c.Grace, 5*time.Minute)
	set(&c.StartDelay, 10*time.Second)
	set(&c.MinTriggerGap, 2*time.Second)
	set(&c.CRITimeout, 5*time.Second)
	if c.Mode == "" {
		c.Mode = Enforce
	}
	if c.NetworkName == "" {
		c.NetworkName = "aws-cni"
	}
	if c.IfName == "" {
		c.IfName = "eth0"
	}
}

// LoadConfig reads the POD_IP_RECONCILE_* variables and
// CRI_RUNTIME_ENDPOINT. Unlike upstream's lenient parsing, a mode it does
// not know is an error: guessing could free addresses the operator meant
// only to report.
func LoadConfig(env envutil.Lookup) (Config, error) {
	var c Config
	switch m := strings.ToLower(envutil.String(env, "POD_IP_RECONCILE_MODE", string(Enforce))); m {
	case "enforce", "report", "off":
		c.Mode = Mode(m)
	default:
		return c, fmt.Errorf("POD_IP_RECONCILE_MODE=%q: must be enforce, report or off", m)
	}
	var err error
	if c.Interval, err = envDuration(env, "POD_IP_RECONCILE_INTERVAL", time.Minute, MinInterval); err != nil {
		return c, err
	}
	if c.Grace, err = envDuration(env, "POD_IP_RECONCILE_GRACE_PERIOD", 5*time.Minute, MinGrace); err != nil {
		return c, err
	}
	if v := strings.TrimSpace(envutil.String(env, "POD_IP_RECONCILE_MAX_RELEASE_PER_PASS", "")); v != "" {
		if pct, ok := strings.CutSuffix(v, "%"); ok {
			n, err := strconv.Atoi(pct)
			if err != nil || n < 1 || n > 100 {
				return c, fmt.Errorf("POD_IP_RECONCILE_MAX_RELEASE_PER_PASS=%q: want a count or a percentage 1%%-100%%", v)
			}
			c.MaxReleasePercent = n
		} else {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return c, fmt.Errorf("POD_IP_RECONCILE_MAX_RELEASE_PER_PASS=%q: want a count >= 1 or a percentage", v)
			}
			c.MaxReleasePerPass = n
		}
	}
	c.CRIEndpoint = strings.TrimSpace(envutil.String(env, "CRI_RUNTIME_ENDPOINT", ""))
	if c.CRIEndpoint != "" {
		if _, err := cri.NormalizeEndpoint(c.CRIEndpoint); err != nil {
			return c, err
		}
	}
	c.SetDefaults()
	return c, nil
}

// Floors of the reconciler's timings: a shorter interval busy-loops on the
// runtime, and a shorter grace could reach an allocation whose CNI ADD is
// still running (runtimes list a sandbox only after its ADD returned).
const (
	MinInterval = 5 * time.Second
	MinGrace    = 30 * time.Second
)

// envDuration reads a Go duration with its unit ("90s", "5m") of at least
// floor. A bare number is refused: "5" could mean seconds or minutes, and
// guessing wrong removes the in-flight ADD protection.
func envDuration(env envutil.Lookup, name string, def, floor time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(envutil.String(env, name, ""))
	if v == "" {
		return def, nil
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return 0, fmt.Errorf("%s=%q: a duration needs a unit, e.g. %q", name, v, v+"s")
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want a duration such as 1m or 90s", name, v)
	}
	if d < floor {
		return 0, fmt.Errorf("%s=%q: must be at least %s", name, v, floor)
	}
	return d, nil
}
