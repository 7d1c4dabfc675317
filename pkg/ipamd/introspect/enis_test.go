package introspect

import (
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// cardStore is one card's datastore view: an ENI holding one assigned
// address, built afresh at each call as the datastore's deep copy is.
type cardStore struct {
	eni, ip, containerID string
	device               int
}

func (c cardStore) ENIInfos() datastore.ENIInfos {
	addr := &datastore.AddressView{Address: c.ip,
		IPAMKey: datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: c.containerID, IfName: "eth0"}}
	cidr := &datastore.CidrView{Cidr: net.IPNet{IP: net.ParseIP(c.ip).To4(), Mask: net.CIDRMask(32, 32)},
		IPAddresses: map[string]*datastore.AddressView{c.ip: addr}}
	return datastore.ENIInfos{TotalIPs: 1, AssignedIPs: 1, ENIs: map[string]datastore.ENIView{c.eni: {ID: c.eni, DeviceNumber: c.device,
		AvailableIPv4Cidrs: map[string]*datastore.CidrView{c.ip + "/32": cidr}}}}
}

// /v1/enis is keyed by network card index as a JSON string, one key per
// managed card, and hides the container IDs and interface names of every
// card's addresses, as upstream does.
func TestENIsAreServedPerNetworkCardWithKeysBlanked(t *testing.T) {
	cards := []CardENIs{
		{Index: 0, ENIs: cardStore{eni: "eni-0", ip: "10.0.0.5", containerID: "c0"}},
		{Index: 1, ENIs: cardStore{eni: "eni-1", ip: "10.0.1.5", containerID: "c1"}},
	}
	h := New(Config{Cards: func() []CardENIs { return cards }})
	var got map[string]datastore.ENIInfos
	require.Equal(t, http.StatusOK, get(t, h, PathENIs, &got))
	require.Len(t, got, 2)
	for key, want := range map[string]cardStore{"0": cards[0].ENIs.(cardStore), "1": cards[1].ENIs.(cardStore)} {
		card, ok := got[key]
		require.True(t, ok, "card %s is served", key)
		require.Contains(t, card.ENIs, want.eni)
		a := card.ENIs[want.eni].AvailableIPv4Cidrs[want.ip+"/32"].IPAddresses[want.ip]
		require.NotNil(t, a)
		assert.Equal(t, "aws-cni", a.IPAMKey.NetworkName)
		assert.Empty(t, a.IPAMKey.ContainerID, "card %s", key)
		assert.Empty(t, a.IPAMKey.IfName, "card %s", key)
		assert.Equal(t, 1, card.AssignedIPs)
	}
}

// A node managing card 0 only hands its one datastore as ENIs and is
// served under "0", as before.
func TestENIsOfASingleCardNodeAreCardZero(t *testing.T) {
	h := New(Config{ENIs: cardStore{eni: "eni-0", ip: "10.0.0.5", containerID: "c0"}})
	var got map[string]datastore.ENIInfos
	require.Equal(t, http.StatusOK, get(t, h, PathENIs, &got))
	require.Len(t, got, 1)
	require.Contains(t, got["0"].ENIs, "eni-0")
	assert.Empty(t, got["0"].ENIs["eni-0"].AvailableIPv4Cidrs["10.0.0.5/32"].IPAddresses["10.0.0.5"].IPAMKey.ContainerID)
}
