package ec2sim_test

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

// TestConcurrentChurnKeepsInvariants hammers a small subnet from several
// goroutines while faults flip, then checks that no address or /28 was
// handed out twice and that the subnet's free count adds up.
func TestConcurrentChurnKeepsInvariants(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{
		InstanceType: "m5.4xlarge", // 8 ENIs, 30 addresses each
		Subnets:      []ec2sim.SubnetConfig{{CIDR: "10.0.0.0/24"}},
		AttachDelay:  5 * time.Millisecond,
	})
	c := fastRetryEC2Client(t, sim)
	subnet := sim.SubnetIDs()[0]
	enis := []string{sim.PrimaryENI()}
	for dev := int32(1); dev <= 3; dev++ {
		id := createENI(t, c, subnet)
		_, err := attach(c, sim, id, dev, 0)
		require.NoError(t, err)
		enis = append(enis, id)
	}

	tolerated := map[string]bool{
		"": true, "PrivateIpAddressLimitExceeded": true, "InsufficientFreeAddressesInSubnet": true,
		"InsufficientCidrBlocks": true, "InvalidParameterValue": true, "RequestLimitExceeded": true,
	}
	stopFaults := flipFaults(t, sim, "network/interfaces/macs", func() { _ = sim.ENIs() })

	var wg sync.WaitGroup
	errs := make(chan string, 1000)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range 25 {
				eni := enis[rng.IntN(len(enis))]
				var err error
				switch rng.IntN(4) {
				case 0, 1:
					_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
						NetworkInterfaceId: aws.String(eni), SecondaryPrivateIpAddressCount: aws.Int32(int32(1 + rng.IntN(4))),
					})
				case 2:
					_, err = c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
						NetworkInterfaceId: aws.String(eni), Ipv4PrefixCount: aws.Int32(1),
					})
				case 3:
					var out *ec2.DescribeNetworkInterfacesOutput
					out, err = c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{eni}})
					if err != nil {
						break
					}
					var ips []string
					for _, a := range out.NetworkInterfaces[0].PrivateIpAddresses {
						if !aws.ToBool(a.Primary) && rng.IntN(2) == 0 {
							ips = append(ips, aws.ToString(a.PrivateIpAddress))
						}
					}
					if len(ips) > 0 {
						_, err = c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
							NetworkInterfaceId: aws.String(eni), PrivateIpAddresses: ips,
						})
					}
				}
				errs <- apiCode(err)
			}
		}()
	}
	wg.Wait()
	stopFaults()
	close(errs)
	for code := range errs {
		require.True(t, tolerated[code], "unexpected error code %q", code)
	}

	sim.SetThrottle(0)
	used := map[netip.Addr]string{}
	take := func(a netip.Addr, owner string) {
		prev, dup := used[a]
		require.False(t, dup, "%s handed out to %s and %s", a, prev, owner)
		used[a] = owner
	}
	for _, e := range sim.ENIs() {
		require.LessOrEqual(t, 1+len(e.SecondaryIPs)+len(e.Prefixes), 30, e.ID)
		take(e.PrimaryIP, e.ID)
		for _, ip := range e.SecondaryIPs {
			take(ip, e.ID)
		}
		for _, p := range e.Prefixes {
			require.Equal(t, 28, p.Bits())
			for a := p.Addr(); p.Contains(a); a = a.Next() {
				take(a, e.ID)
			}
		}
	}
	require.Equal(t, int32(256-5-len(used)), subnetFree(t, c, subnet))
}

// flipFaults varies the throttle and the IMDS lag every 3 ms and reads
// the IMDS path (then runs also, if set) while a test's churn runs; the
// returned func stops it and waits.
func flipFaults(t *testing.T, sim *ec2sim.Sim, path string, also func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		md := imdsClient(sim)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(3 * time.Millisecond):
			}
			sim.SetThrottle(float64(i%3) * 0.1)
			sim.SetIMDSLag(time.Duration(i%4) * 5 * time.Millisecond)
			_, _ = metadata(t, md, path)
			if also != nil {
				also()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
