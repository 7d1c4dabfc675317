package ec2sim_test

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/ec2sim/ec2simtest"
)

type wireError struct {
	XMLName   xml.Name `xml:"Response"`
	Code      string   `xml:"Errors>Error>Code"`
	Message   string   `xml:"Errors>Error>Message"`
	RequestID string   `xml:"RequestID"`
}

func form(kv ...string) url.Values {
	v := url.Values{"Version": {"2016-11-15"}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// TestStrictRequests sends raw, unsigned Query requests the SDK would never
// produce and checks each is refused with EC2's code and status.
func TestStrictRequests(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	eni := sim.PrimaryENI()

	cases := []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"unknown action", form("Action", "LaunchRockets"), 400, "InvalidAction"},
		{"no action", form(), 400, "MissingParameter"},
		{"no version", url.Values{"Action": {"DescribeInstances"}}, 400, "MissingParameter"},
		{"missing required", form("Action", "DeleteNetworkInterface"), 400, "MissingParameter"},
		{"missing device index", form("Action", "AttachNetworkInterface", "NetworkInterfaceId", eni, "InstanceId", sim.InstanceID()), 400, "MissingParameter"},
		{"malformed integer", form("Action", "AttachNetworkInterface", "NetworkInterfaceId", eni, "InstanceId", sim.InstanceID(), "DeviceIndex", "one"), 400, "InvalidParameterValue"},
		{"malformed boolean", form("Action", "DetachNetworkInterface", "AttachmentId", "eni-attach-01", "Force", "yes"), 400, "InvalidParameterValue"},
		{"malformed ENI ID", form("Action", "DeleteNetworkInterface", "NetworkInterfaceId", "nic-1"), 400, "InvalidNetworkInterfaceID.Malformed"},
		{"unknown parameter", form("Action", "DescribeInstances", "InstanceIds.1", sim.InstanceID()), 400, "UnknownParameter"},
		{"zero list index", form("Action", "DescribeInstances", "InstanceId.0", sim.InstanceID()), 400, "UnknownParameter"},
		{"filter without name", form("Action", "DescribeSubnets", "Filter.1.Value.1", "x"), 400, "MissingParameter"},
		{"dry run", form("Action", "DescribeInstances", "DryRun", "true"), 412, "DryRunOperation"},
		{"count below one", form("Action", "AssignPrivateIpAddresses", "NetworkInterfaceId", eni, "SecondaryPrivateIpAddressCount", "0"), 400, "InvalidParameterValue"},
		{"bad tag resource type", form("Action", "CreateNetworkInterface", "SubnetId", sim.SubnetIDs()[0],
			"TagSpecification.1.ResourceType", "instance", "TagSpecification.1.Tag.1.Key", "k"), 400, "InvalidParameterValue"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := postForm(t, sim, tc.form)
			var we wireError
			require.NoError(t, xml.Unmarshal([]byte(body), &we), body)
			require.Equal(t, tc.code, we.Code, body)
			require.Equal(t, tc.status, status, body)
			require.NotEmpty(t, we.Message)
			require.NotEmpty(t, we.RequestID)
		})
	}

	resp, err := http.Get(sim.EC2Endpoint() + "/?Action=DescribeInstances&Version=2016-11-15")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	// Every request was logged, rejected ones included.
	calls := sim.Calls()
	require.Equal(t, 1, calls["LaunchRockets"])
	require.Equal(t, 2, calls["DeleteNetworkInterface"]) // missing parameter, malformed ID
	require.Len(t, sim.CallLog(), len(cases)+1)
	require.Len(t, sim.ENIs(), 1, "nothing changed")
}

// TestUnsignedHappyPath: a raw unsigned request succeeds and the response
// carries the 2016-11-15 namespace and a requestId.
func TestUnsignedHappyPath(t *testing.T) {
	sim := ec2simtest.Start(t, ec2sim.Config{})
	status, body := postForm(t, sim, form("Action", "DescribeNetworkInterfaces", "NetworkInterfaceId.1", sim.PrimaryENI()))
	require.Equal(t, http.StatusOK, status, body)
	var resp struct {
		XMLName   xml.Name
		RequestID string   `xml:"requestId"`
		IDs       []string `xml:"networkInterfaceSet>item>networkInterfaceId"`
	}
	require.NoError(t, xml.Unmarshal([]byte(body), &resp))
	require.Equal(t, "DescribeNetworkInterfacesResponse", resp.XMLName.Local)
	require.Equal(t, "http://ec2.amazonaws.com/doc/2016-11-15/", resp.XMLName.Space)
	require.NotEmpty(t, resp.RequestID)
	require.Equal(t, []string{sim.PrimaryENI()}, resp.IDs)
}
