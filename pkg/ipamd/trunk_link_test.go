package ipamd

import (
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The trunk's link is found by its MAC among the links of ipamd's network
// namespace (here a namespace of the test's own, never the host's).
func TestTrunkLinkIsFoundByItsMAC(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and a veth pair in it")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	require.NoError(t, err)
	defer orig.Close()
	ns, err := netns.New() // also switches this thread into it
	require.NoError(t, err)
	defer func() {
		require.NoError(t, netns.Set(orig))
		ns.Close()
	}()

	mac, _ := net.ParseMAC("02:00:00:00:0a:01")
	require.NoError(t, netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "trunk0", HardwareAddr: mac}, PeerName: "peer0"}))
	l, err := netlink.LinkByName("trunk0")
	require.NoError(t, err)

	idx, err := linkIndexByMAC("02:00:00:00:0A:01")
	require.NoError(t, err)
	assert.Equal(t, l.Attrs().Index, idx)
	_, err = linkIndexByMAC("02:00:00:00:0a:02")
	assert.Error(t, err)
}
