package ipamcheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// Exit codes.
const (
	ExitClean       = 0 // no leak ipamd confirmed
	ExitLeaks       = 1 // leaks found that ipamd confirmed (the runtime said their sandboxes are gone)
	ExitCannotCheck = 2 // ipamd or the runtime could not be read, or bad flags
)

// Defaults are ipamd's own, handed in by the binary so that the check
// looks where ipamd serves and lists: the introspection address
// (INTROSPECTION_BIND_ADDRESS overrides it) and the runtime sockets
// probed when CRI_RUNTIME_ENDPOINT is unset.
type Defaults struct {
	IntrospectionAddr string
	RuntimeCandidates []string
}

// Main runs `aws-k8s-agent ipam-check` with args (after the subcommand)
// and the environment env, and returns the exit code.
func Main(args []string, env func(string) (string, bool), stdout, stderr io.Writer, d Defaults) int {
	o, code, ok := parseFlags(args, env, stderr, d)
	if !ok {
		return code
	}
	cannot := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "ipam-check: could not check: "+format+"\n", a...)
		return ExitCannotCheck
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	// The runtime first: an allocation made after this list is young, so
	// it reads as in flight rather than absent.
	rt, sandboxes, err := openAndList(ctx, o.runtimeEndpoint, d.RuntimeCandidates, o.ownPod, o.timeout)
	used := ""
	if rt != nil {
		defer rt.Close()
		used = rt.Endpoint()
	}
	if err != nil {
		where := "at " + o.runtimeEndpoint
		if o.runtimeEndpoint == "" {
			where = "no endpoint set, so ipamd's default sockets were probed"
		}
		return cannot("container runtime unreachable (%s): %v\n"+
			"set its socket with -runtime-endpoint or CRI_RUNTIME_ENDPOINT (ipamd reads the same variable)", where, err)
	}
	ipamd := newIntrospection(o.introspectionAddr, o.timeout)
	introspectionHint := "set its address with -introspection-addr or INTROSPECTION_BIND_ADDRESS (ipamd reads the same variable)"
	// Parsed as ipamd parses it (1, t, true, ...); a bad value is ipamd's
	// to report, so this says nothing of it.
	quiet := envutil.Env{Lookup: env, Warn: func(string, string, string) {}}
	if quiet.StrictBool("DISABLE_INTROSPECTION", false) {
		v, _ := quiet.Value("DISABLE_INTROSPECTION")
		introspectionHint += "; DISABLE_INTROSPECTION=" + v + " is set, which turns ipamd's introspection off"
	}
	enis, err := ipamd.enis(ctx)
	if err != nil {
		return cannot("ipamd's introspection unreachable at %s: %v\n%s", o.introspectionAddr, err, introspectionHint)
	}
	st, err := ipamd.reconciler(ctx)
	switch {
	case errors.Is(err, ErrReconcilerOff):
		return cannot("%v", err)
	case err != nil:
		return cannot("ipamd's introspection unreachable at %s: %v\n%s", o.introspectionAddr, err, introspectionHint)
	}
	grace, err := time.ParseDuration(st.Grace)
	if err != nil {
		return cannot("/v1/reconciler: grace period %q: %v", st.Grace, err)
	}
	cooldown, _ := time.ParseDuration(st.IPCooldown) // older ipamd: unknown, shown without an end
	if len(sandboxes) == 0 && len(st.Allocations) > 0 {
		// The reconciler skips such a pass too: a node always lists at
		// least aws-node's own sandbox.
		return cannot("the runtime on %s listed no pod sandbox at all while ipamd holds %s; that answer is not trusted",
			used, plural(len(st.Allocations), "allocation", "allocations"))
	}

	// The subnets only explain: a failure to read them is noted, not fatal.
	subnets, _, err := ipamd.subnets(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "ipam-check: note: the subnets' free addresses are not shown: %v\n", err)
	}

	now := time.Now()
	others := unheldStatuses(ctx, rt, sandboxes, st.Allocations)
	res := Classify(Input{Now: now, Sandboxes: sandboxes, ENIs: enis.all, ENICards: enis.cardOf, Reconciler: st, Grace: grace, Cooldown: cooldown, All: o.all, Others: others})
	rep := Report{CheckedAt: now.UTC(), RuntimeEndpoint: used, Sandboxes: len(sandboxes),
		Reconciler: ReconcilerInfo{Mode: string(st.Mode), GracePeriod: st.Grace, IPCooldown: st.IPCooldown,
			LastPass: st.LastPass.Start, LastPassSkipped: st.LastPass.Skipped, RuntimeReachable: st.RuntimeReachable, PendingReason: st.PendingReason},
		Addresses: res.Addresses, UnassignedByENI: res.UnassignedByENI, Summary: res.Summary, LeaksFound: res.Summary.ConfirmedLeaks > 0,
		NetworkCards: enis.cards, Subnets: orderSubnets(subnets, enis.all)}
	if o.output == "json" {
		err = writeJSON(stdout, rep)
	} else {
		err = writeTable(stdout, rep)
	}
	if err != nil {
		return cannot("write: %v", err)
	}
	if rep.LeaksFound {
		return ExitLeaks
	}
	return ExitClean
}
