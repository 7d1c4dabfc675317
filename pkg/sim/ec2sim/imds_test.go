package ec2sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

func rawIMDS(t *testing.T, method, url string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestIMDSTokenRequired(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	base := sim.IMDSEndpoint()

	code, _ := rawIMDS(t, http.MethodGet, base+"/latest/meta-data/instance-id", nil)
	require.Equal(t, http.StatusUnauthorized, code, "IMDSv1 (no token) is refused")
	code, _ = rawIMDS(t, http.MethodGet, base+"/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": "forged"})
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = rawIMDS(t, http.MethodPut, base+"/latest/api/token", nil)
	require.Equal(t, http.StatusBadRequest, code, "TTL header required")
	code, _ = rawIMDS(t, http.MethodPut, base+"/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "99999"})
	require.Equal(t, http.StatusBadRequest, code, "TTL above 6 h")

	code, tok := rawIMDS(t, http.MethodPut, base+"/latest/api/token", map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"})
	require.Equal(t, http.StatusOK, code)
	code, body := rawIMDS(t, http.MethodGet, base+"/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": tok})
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, sim.InstanceID(), body)
	code, _ = rawIMDS(t, http.MethodPost, base+"/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": tok})
	require.Equal(t, http.StatusMethodNotAllowed, code)
}

func TestIMDSPaths(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{InstanceType: "t3.medium"})
	md := imdsClient(sim)
	c := ec2Client(t, sim)
	primary := describeENI(t, c, sim.PrimaryENI())
	mac := aws.ToString(primary.MacAddress)

	require.Equal(t, "us-west-2a", mustMetadata(t, md, "placement/availability-zone"))
	require.Equal(t, aws.ToString(primary.PrivateIpAddress), mustMetadata(t, md, "local-ipv4"))
	require.Equal(t, sim.InstanceID(), mustMetadata(t, md, "instance-id"))
	require.Equal(t, "t3.medium", mustMetadata(t, md, "instance-type"))
	require.Equal(t, mac, mustMetadata(t, md, "mac"))
	require.Equal(t, mac+"/", mustMetadata(t, md, "network/interfaces/macs/"))

	base := "network/interfaces/macs/" + mac + "/"
	fields := strings.Split(mustMetadata(t, md, base), "\n")
	require.Subset(t, fields, []string{"device-number", "interface-id", "local-ipv4s", "network-card",
		"security-group-ids", "subnet-id", "subnet-ipv4-cidr-block", "vpc-id", "vpc-ipv4-cidr-blocks"})
	require.NotContains(t, fields, "ipv4-prefix")
	require.NotContains(t, fields, "ipv6s")
	require.Equal(t, sim.PrimaryENI(), mustMetadata(t, md, base+"interface-id"))
	require.Equal(t, "0", mustMetadata(t, md, base+"device-number"))
	require.Equal(t, "0", mustMetadata(t, md, base+"network-card"))
	require.Equal(t, sim.SubnetIDs()[0], mustMetadata(t, md, base+"subnet-id"))
	require.Equal(t, sim.VPCID(), mustMetadata(t, md, base+"vpc-id"))
	require.Equal(t, "sg-0sim00000001", mustMetadata(t, md, base+"security-group-ids"))
	require.Equal(t, "10.0.0.0/20", mustMetadata(t, md, base+"subnet-ipv4-cidr-block"))
	require.Equal(t, "10.0.0.0/16", mustMetadata(t, md, base+"vpc-ipv4-cidr-blocks"))
	require.Equal(t, aws.ToString(primary.PrivateIpAddress), mustMetadata(t, md, base+"local-ipv4s"))

	for _, p := range []string{"ipv6", base + "ipv6s", base + "ipv6-prefix", base + "subnet-ipv6-cidr-blocks",
		base + "vpc-ipv6-cidr-blocks", base + "ipv4-prefix", "network/interfaces/macs/02:00:00:00:00:00/interface-id", "no-such-path"} {
		_, err := metadata(t, md, p)
		require.Error(t, err, p)
		require.Equal(t, http.StatusNotFound, httpStatus(err), p)
	}

	doc, err := md.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	require.NoError(t, err)
	require.Equal(t, "us-west-2", doc.Region)
	require.Equal(t, "us-west-2a", doc.AvailabilityZone)
	require.Equal(t, sim.InstanceID(), doc.InstanceID)
	require.Equal(t, "t3.medium", doc.InstanceType)
	require.Equal(t, aws.ToString(primary.PrivateIpAddress), doc.PrivateIP)
	require.NotEmpty(t, doc.AccountID)
	region, err := md.GetRegion(ctx, &imds.GetRegionInput{})
	require.NoError(t, err)
	require.Equal(t, "us-west-2", region.Region)

	var raw map[string]any
	out, err := md.GetDynamicData(ctx, &imds.GetDynamicDataInput{Path: "instance-identity/document"})
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(out.Content).Decode(&raw))
	require.Equal(t, "us-west-2", raw["region"])
}

// TestIMDSLag: with a lag, an address assigned in EC2 shows in IMDS only
// once the lag has passed; EC2 itself is current at once.
func TestIMDSLag(t *testing.T) {
	const lag = 400 * time.Millisecond
	sim := ec2simtest.Start(t, ec2sim.Config{})
	c := ec2Client(t, sim)
	md := imdsClient(sim)
	mac := eniState(t, sim, sim.PrimaryENI()).MAC
	path := "network/interfaces/macs/" + mac + "/local-ipv4s"

	sim.SetIMDSLag(lag)
	assignedAt := time.Now() // the assignment happens after this
	out, err := c.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(sim.PrimaryENI()), SecondaryPrivateIpAddressCount: aws.Int32(1),
	})
	require.NoError(t, err)
	ip := aws.ToString(out.AssignedPrivateIpAddresses[0].PrivateIpAddress)
	require.Len(t, describeENI(t, c, sim.PrimaryENI()).PrivateIpAddresses, 2, "EC2 is current")

	if time.Since(assignedAt) < lag/2 {
		require.NotContains(t, mustMetadata(t, md, path), ip, "IMDS still shows the old state")
	}
	eventually(t, 3*time.Second, func() bool {
		v, err := metadata(t, md, path)
		return err == nil && strings.Contains(v, ip)
	}, "IMDS never caught up")
	require.GreaterOrEqual(t, time.Since(assignedAt), lag)

	// Dropping the lag shows the present at once.
	sim.SetIMDSLag(0)
	_, err = c.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(sim.PrimaryENI()), PrivateIpAddresses: []string{ip},
	})
	require.NoError(t, err)
	require.NotContains(t, mustMetadata(t, md, path), ip)
}
