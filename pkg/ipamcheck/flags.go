package ipamcheck

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// options are the command's flags.
type options struct {
	output, introspectionAddr, runtimeEndpoint string
	timeout                                    time.Duration
	all                                        bool
	// ownPod is MY_POD_NAME, set in the aws-node container: probing
	// without an endpoint prefers the runtime that lists that pod, as
	// ipamd's does.
	ownPod string
}

// parseFlags reads args; defaults come from ipamd's variables in env,
// then d. When it returns ok false the command ends with code.
func parseFlags(args []string, env func(string) (string, bool), stderr io.Writer, d Defaults) (o options, code int, ok bool) {
	e := envutil.Env{Lookup: env}
	getenv := func(k, def string) string {
		if v, ok := e.Value(k); ok {
			return v
		}
		return def
	}
	o.ownPod = getenv("MY_POD_NAME", "")
	fs := flag.NewFlagSet("ipam-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.output, "o", "table", "output: table or json")
	fs.StringVar(&o.introspectionAddr, "introspection-addr", getenv("INTROSPECTION_BIND_ADDRESS", d.IntrospectionAddr),
		"ipamd's introspection: host:port or unix:<path> (default: INTROSPECTION_BIND_ADDRESS, else ipamd's default)")
	fs.StringVar(&o.runtimeEndpoint, "runtime-endpoint", getenv("CRI_RUNTIME_ENDPOINT", ""),
		"container runtime socket (default: CRI_RUNTIME_ENDPOINT, else the sockets ipamd probes: "+strings.Join(d.RuntimeCandidates, ", ")+")")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "bound on the whole check")
	fs.BoolVar(&o.all, "all", false, "list every unassigned address, not a count per ENI")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: aws-k8s-agent ipam-check [flags]")
		fmt.Fprintln(stderr, "Compares ipamd's pod IP allocations with the runtime's pod sandboxes; changes nothing.")
		fmt.Fprintln(stderr, "Exit code: 0 no leak ipamd confirmed, 1 leaks ipamd confirmed (the runtime said their sandboxes are gone), 2 could not check.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, ExitClean, false
		}
		return o, ExitCannotCheck, false
	}
	switch {
	case o.output != "table" && o.output != "json":
		fmt.Fprintf(stderr, "ipam-check: -o %q: want table or json\n", o.output)
	case o.timeout <= 0:
		fmt.Fprintf(stderr, "ipam-check: -timeout %s: want a positive duration\n", o.timeout)
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "ipam-check: unexpected arguments %q\n", fs.Args())
	default:
		return o, 0, true
	}
	return o, ExitCannotCheck, false
}
