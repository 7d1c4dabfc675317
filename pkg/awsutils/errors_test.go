package awsutils

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		code string
		want error
	}{
		{"InsufficientFreeAddressesInSubnet", ErrSubnetExhausted},
		{"InsufficientCidrBlocks", ErrSubnetExhausted},
		{"PrivateIpAddressLimitExceeded", ErrAddressLimit},
		{"AddressLimitExceeded", ErrAddressLimit},
		{"AttachmentLimitExceeded", ErrENILimit},
		{"UnauthorizedOperation", ErrUnauthorized},
		{"InvalidNetworkInterfaceID.NotFound", ErrNotFound},
		{"InvalidAttachmentID.NotFound", ErrNotFound},
		{"RequestLimitExceeded", ErrThrottled},
		{"Throttling", ErrThrottled},
		{"InvalidNetworkInterface.InUse", ErrENIInUse},
		{"InternalError", nil},
		{"InvalidParameterValue", nil},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			sdkErr := &smithy.GenericAPIError{Code: tt.code, Message: "boom"}
			for _, in := range []error{sdkErr, fmt.Errorf("operation error EC2: %w", sdkErr)} {
				err := classify("SomeAction", in)
				onlyClass(t, err, tt.want)
				ae := asAPIError(t, err)
				assert.Equal(t, "SomeAction", ae.Action)
				assert.Equal(t, tt.code, ae.Code)
				assert.ErrorIs(t, err, in, "the SDK error stays reachable")
				var api smithy.APIError
				require.ErrorAs(t, err, &api)
				assert.Equal(t, tt.code, api.ErrorCode())
				assert.Contains(t, err.Error(), "ec2 SomeAction: ")
				assert.Contains(t, err.Error(), "boom")
			}
		})
	}

	t.Run("delete of an attached ENI: generic code, told by its text", func(t *testing.T) {
		err := classify("DeleteNetworkInterface", &smithy.GenericAPIError{
			Code: "InvalidParameterValue", Message: "Network interface 'eni-0abc' is currently in use."})
		onlyClass(t, err, ErrENIInUse)
	})
	t.Run("nil stays nil", func(t *testing.T) {
		assert.NoError(t, classify("X", nil))
	})
	t.Run("transport error has no code", func(t *testing.T) {
		err := classify("X", errors.New("connection refused"))
		onlyClass(t, err, nil)
		assert.Empty(t, asAPIError(t, err).Code)
	})
}

func TestUnauthorized(t *testing.T) {
	tests := []struct {
		action string
		call   func(c *Client, sim *ec2sim.Sim) error
	}{
		{"AssignPrivateIpAddresses", func(c *Client, sim *ec2sim.Sim) error {
			_, err := c.AssignIPs(context.Background(), sim.PrimaryENI(), 1)
			return err
		}},
		{"UnassignPrivateIpAddresses", func(c *Client, sim *ec2sim.Sim) error {
			ips, err := sim.AddSecondaryIPs(sim.PrimaryENI(), 1)
			require.NoError(t, err)
			return c.UnassignIPs(context.Background(), sim.PrimaryENI(), ips)
		}},
		{"DescribeNetworkInterfaces", func(c *Client, _ *ec2sim.Sim) error {
			_, err := c.InstanceENIs(context.Background())
			return err
		}},
		{"CreateNetworkInterface", func(c *Client, _ *ec2sim.Sim) error {
			_, err := c.AllocENI(context.Background(), AllocOptions{})
			return err
		}},
		{"DescribeInstances", func(c *Client, _ *ec2sim.Sim) error {
			_, err := c.AllocENI(context.Background(), AllocOptions{})
			return err
		}},
		{"DescribeInstanceTypes", func(c *Client, _ *ec2sim.Sim) error {
			_, err := c.DescribeInstanceTypeLimits(context.Background(), "m5.large")
			return err
		}},
		{"CreateTags", func(c *Client, sim *ec2sim.Sim) error {
			return c.TagENI(context.Background(), sim.PrimaryENI(), map[string]string{"k": "v"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			sim, c := simClient(t, ec2sim.Config{}, Options{})
			sim.SetUnauthorized(tt.action, true)
			sim.ResetCalls()
			err := tt.call(c, sim)
			onlyClass(t, err, ErrUnauthorized)
			ae := asAPIError(t, err)
			assert.Equal(t, tt.action, ae.Action)
			assert.Equal(t, ec2sim.CodeUnauthorizedOperation, ae.Code)
			assert.Equal(t, 1, callsFor(sim, tt.action), "a missing permission is not retried")
		})
	}
}

func TestThrottledAfterMaxAttempts(t *testing.T) {
	for _, attempts := range []int{1, 3, 4} {
		t.Run(fmt.Sprintf("MaxAttempts=%d", attempts), func(t *testing.T) {
			sim, c := simClient(t, ec2sim.Config{}, Options{MaxAttempts: attempts})
			sim.SetThrottle(1.0)
			_, err := c.AssignIPs(context.Background(), sim.PrimaryENI(), 1)
			onlyClass(t, err, ErrThrottled)
			ae := asAPIError(t, err)
			assert.Equal(t, "AssignPrivateIpAddresses", ae.Action)
			assert.Equal(t, ec2sim.CodeRequestLimitExceeded, ae.Code)
			assert.Equal(t, attempts, callsFor(sim, "AssignPrivateIpAddresses"))
			var tries []int
			for i, call := range sim.CallLog() {
				assert.Equal(t, ec2sim.CodeRequestLimitExceeded, call.ErrorCode)
				assert.Equal(t, i+1, call.Attempt, "one SDK attempt per request")
				tries = append(tries, call.Attempt)
			}
			assert.Len(t, tries, attempts)
			assert.Empty(t, mustSimENI(t, sim, sim.PrimaryENI()).SecondaryIPs)
		})
	}
}

func TestThrottledAfterRetryQuotaRunsOut(t *testing.T) {
	// Under sustained throttling the SDK's retry quota (a token bucket per
	// client) runs dry and it stops retrying; the error must still be
	// classified as throttling.
	sim, c := simClient(t, ec2sim.Config{}, Options{MaxBackoff: time.Millisecond})
	sim.SetThrottle(1.0)
	for i := range 100 {
		sim.ResetCalls()
		_, err := c.DescribeInstanceTypeLimits(context.Background(), "m5.large")
		onlyClass(t, err, ErrThrottled)
		assert.Equal(t, ec2sim.CodeRequestLimitExceeded, asAPIError(t, err).Code)
		if callsFor(sim, "DescribeInstanceTypes") == 1 {
			t.Logf("retry quota ran out after %d calls", i)
			return
		}
	}
	t.Fatal("the retry quota never ran out")
}

func TestServerErrorsRetriedThenFail(t *testing.T) {
	sim, c := simClient(t, ec2sim.Config{}, Options{})
	sim.SetServerErrors(1.0)
	_, err := c.AssignIPs(context.Background(), sim.PrimaryENI(), 1)
	onlyClass(t, err, nil)
	ae := asAPIError(t, err)
	assert.Equal(t, ec2sim.CodeInternalError, ae.Code)
	assert.Equal(t, 4, callsFor(sim, "AssignPrivateIpAddresses"), "retried up to MaxAttempts")
}

func TestTransientFaultsAreRetried(t *testing.T) {
	// A fixed seed makes the simulator's fault decisions reproducible; 8
	// attempts make a failure after retries vanishingly unlikely anyway
	// (0.3^8 per call).
	tests := []struct {
		name  string
		fault func(*ec2sim.Sim)
		code  string
	}{
		{"throttling 30%", func(s *ec2sim.Sim) { s.SetThrottle(0.3) }, ec2sim.CodeRequestLimitExceeded},
		{"server errors 30%", func(s *ec2sim.Sim) { s.SetServerErrors(0.3) }, ec2sim.CodeInternalError},
	}
	const ops = 20
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim, c := simClient(t, ec2sim.Config{}, Options{MaxAttempts: 8, MaxBackoff: 5 * time.Millisecond})
			tt.fault(sim)
			ctx := context.Background()
			for i := range ops {
				// Alternate assign and unassign so the ENI never fills up.
				ips, err := c.AssignIPs(ctx, sim.PrimaryENI(), 1)
				require.NoError(t, err, "op %d", i)
				require.NoError(t, c.UnassignIPs(ctx, sim.PrimaryENI(), ips), "op %d", i)
			}
			faults := 0
			for _, call := range sim.CallLog() {
				if call.ErrorCode != "" {
					assert.Equal(t, tt.code, call.ErrorCode)
					faults++
				}
			}
			assert.Positive(t, faults, "some requests were refused and retried")
			assert.Equal(t, 2*ops+faults, len(sim.CallLog()))
			assert.Empty(t, mustSimENI(t, sim, sim.PrimaryENI()).SecondaryIPs)
		})
	}
}
