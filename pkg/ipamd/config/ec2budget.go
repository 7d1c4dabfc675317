package config

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// The node's EC2 request budget: every EC2 request attempt ipamd makes
// takes a token from one bucket that holds EC2_API_BURST tokens and
// refills at EC2_API_RATE_LIMIT a second. They are this project's own
// settings; a value that does not parse, or is out of range, stops ipamd
// (a limit silently replaced by a default would be no limit the operator
// chose).
const (
	envEC2RateLimit = "EC2_API_RATE_LIMIT"
	envEC2Burst     = "EC2_API_BURST"
	maxEC2RateLimit = 1000.0
	maxEC2Burst     = 1000
)

// WARM_POOL_START_SPREAD: after ipamd starts, growth for the warm target
// alone (a spare: pods are not about to wait on it) starts at a random
// point of this period. Growth that pods are about to wait on never
// waits. A fleet started together then does not create its spare ENIs in
// the same minutes as the ENIs its pods need: EC2 creates and attaches
// five ENIs a second for the whole account by default. 0 grows at once,
// as upstream.
const (
	envWarmStartSpread     = "WARM_POOL_START_SPREAD"
	defaultWarmStartSpread = 10 * time.Minute
	maxWarmStartSpread     = time.Hour
)

func loadWarmStartSpread(env envutil.Env) (time.Duration, error) {
	v, ok := env.Value(envWarmStartSpread)
	if !ok {
		return defaultWarmStartSpread, nil
	}
	if v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxWarmStartSpread {
		return 0, fmt.Errorf("%s %q must be a duration with a unit (such as 10m) from 0 to %v", envWarmStartSpread, v, maxWarmStartSpread)
	}
	return d, nil
}

func loadEC2Budget(env envutil.Env) (awsutils.Budget, error) {
	b := awsutils.Budget{CallsPerSecond: awsutils.DefaultEC2CallsPerSecond, Burst: awsutils.DefaultEC2Burst}
	if v, ok := env.Value(envEC2RateLimit); ok {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || !(r > 0) || r > maxEC2RateLimit {
			return b, fmt.Errorf("%s %q must be a number of EC2 requests a second above 0 and at most %g", envEC2RateLimit, v, maxEC2RateLimit)
		}
		b.CallsPerSecond = r
	}
	n, ok, err := env.LookupInt(envEC2Burst, 1, maxEC2Burst)
	if err != nil {
		return b, err
	}
	if ok {
		b.Burst = n
	}
	return b, nil
}
