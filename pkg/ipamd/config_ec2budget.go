package ipamd

import (
	"fmt"
	"strconv"

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
