package ec2sim_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

// sdkConfig is how a caller would build its AWS config, with static
// credentials so that nothing looks at the real environment.
func sdkConfig(t *testing.T) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-west-2"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")),
	)
	require.NoError(t, err)
	return cfg
}

// ec2Client talks to the simulator with the SDK's default retryer.
func ec2Client(t *testing.T, sim *ec2sim.Sim) *ec2.Client {
	return ec2.NewFromConfig(sdkConfig(t), func(o *ec2.Options) {
		o.BaseEndpoint = aws.String(sim.EC2Endpoint())
	})
}

// fastRetryEC2Client keeps the SDK's standard retry rules (which errors
// are retried, 3 attempts, retry quota) but backs off for 1 ms instead of
// up to seconds, so fault tests stay fast.
func fastRetryEC2Client(t *testing.T, sim *ec2sim.Sim) *ec2.Client {
	return ec2.NewFromConfig(sdkConfig(t), func(o *ec2.Options) {
		o.BaseEndpoint = aws.String(sim.EC2Endpoint())
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		})
	})
}

func imdsClient(sim *ec2sim.Sim) *imds.Client {
	return imds.New(imds.Options{Endpoint: sim.IMDSEndpoint()})
}

// apiCode returns the EC2 error code carried by an SDK error, "" if none.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// requireCode asserts that err is an EC2 API error with the code.
func requireCode(t *testing.T, err error, code string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apiCode(err), "error: %v", err)
}

// metadata reads one IMDS path through the SDK.
func metadata(t *testing.T, c *imds.Client, path string) (string, error) {
	t.Helper()
	out, err := c.GetMetadata(context.Background(), &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", err
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	return string(b), err
}

func mustMetadata(t *testing.T, c *imds.Client, path string) string {
	t.Helper()
	v, err := metadata(t, c, path)
	require.NoError(t, err, path)
	return v
}

// postForm sends a raw, unsigned EC2 Query request.
func postForm(t *testing.T, sim *ec2sim.Sim, form url.Values) (int, string) {
	t.Helper()
	resp, err := http.Post(sim.EC2Endpoint(), "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

var ctx = context.Background()

// eniState finds an ENI in the simulator's truth.
func eniState(t *testing.T, sim *ec2sim.Sim, id string) ec2sim.ENIState {
	t.Helper()
	for _, e := range sim.ENIs() {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("ENI %s not in simulator", id)
	return ec2sim.ENIState{}
}

// eventually polls cond every 10 ms until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, timeout, 10*time.Millisecond, msg)
}

func tagsKV(kv ...string) []types.Tag {
	var out []types.Tag
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, types.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return out
}

// requireNoRetries asserts that every EC2 request so far was a first
// attempt: without faults the SDK must never have had to retry.
func requireNoRetries(t *testing.T, sim *ec2sim.Sim) {
	t.Helper()
	for _, c := range sim.CallLog() {
		require.Equal(t, 1, c.Attempt, "%s was retried (%+v)", c.Action, c)
	}
}
