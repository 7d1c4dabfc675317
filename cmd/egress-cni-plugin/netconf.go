package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	cniversion "github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/utils"
)

// Names and ranges upstream uses (must match: policy engines and
// troubleshooting guides know them).
const (
	v4IfName = "v4if0" // the pod's IPv4 egress interface (IPv6 clusters)
	v6IfName = "v6if0" // the pod's IPv6 egress interface (IPv4 clusters)

	v4ChainPrefix = "E4-" // chains CNI-E4-<hash>
	v6ChainPrefix = "E6-" // chains CNI-E6-<hash>

	v4Multicast = "224.0.0.0/4"
	v6Multicast = "ff00::/8"

	defaultLogFile  = "/var/log/aws-routed-eni/egress-plugin.log"
	defaultLogLevel = "Debug"
)

// NetConf is the plugin's entry of 10-aws.conflist as the runtime hands it
// over: the standard keys (ipam, prevResult, ...) and upstream's keys.
type NetConf struct {
	types.NetConf

	// IfName is accepted for upstream's schema; the interface is always
	// v4if0 or v6if0, by the family of NodeIP, as upstream.
	IfName         string `json:"ifName"`
	MTU            string `json:"mtu"`
	Enabled        string `json:"enabled"`
	RandomizeSNAT  string `json:"randomizeSNAT"`
	NodeIP         net.IP `json:"nodeIP"`
	PluginLogFile  string `json:"pluginLogFile"`
	PluginLogLevel string `json:"pluginLogLevel"`
}

// loadNetConf decodes stdin. A prevResult that cannot be parsed is
// returned as prevErr, not as a failure: only ADD needs it.
func loadNetConf(data []byte) (conf *NetConf, prevErr error, err error) {
	if strings.TrimSpace(string(data)) == "" {
		return nil, nil, fmt.Errorf("empty network configuration on stdin")
	}
	conf = &NetConf{}
	if err := json.Unmarshal(data, conf); err != nil {
		return nil, nil, fmt.Errorf("failed to parse network configuration: %w", err)
	}
	if conf.PluginLogFile == "" {
		conf.PluginLogFile = defaultLogFile
	}
	if conf.PluginLogLevel == "" {
		conf.PluginLogLevel = defaultLogLevel
	}
	if conf.RawPrevResult != nil {
		if err := cniversion.ParsePrevResult(&conf.NetConf); err != nil {
			prevErr = fmt.Errorf("could not parse prevResult: %w", err)
			conf.PrevResult = nil
		}
	}
	return conf, prevErr, nil
}

// enabled says whether the plugin acts; anything but "true" passes
// through, as upstream.
func (c *NetConf) enabled() bool { return c.Enabled == "true" }

// egressFamily is what one kind of egress uses.
type egressFamily struct {
	v6          bool
	ifName      string
	chainPrefix string
	multicast   string
}

var (
	v4Egress = egressFamily{v6: false, ifName: v4IfName, chainPrefix: v4ChainPrefix, multicast: v4Multicast}
	v6Egress = egressFamily{v6: true, ifName: v6IfName, chainPrefix: v6ChainPrefix, multicast: v6Multicast}
)

// family picks the egress kind from nodeIP: an IPv4 nodeIP means IPv4
// egress; anything else IPv6 egress, which needs a global unicast nodeIP
// to SNAT to (checked by checkNodeIP).
func (c *NetConf) family() egressFamily {
	if c.NodeIP.To4() != nil {
		return v4Egress
	}
	return v6Egress
}

// checkNodeIP refuses an ADD that has no usable SNAT target.
func (c *NetConf) checkNodeIP() error {
	if c.NodeIP.To4() != nil {
		return nil
	}
	if c.NodeIP == nil || !c.NodeIP.IsGlobalUnicast() {
		return fmt.Errorf("nodeIP %q is not a global unicast IPv6 address: IPv6 egress needs the node's IPv6 address (IMDS ipv6) to SNAT to", c.NodeIP.String())
	}
	return nil
}

// podMTU parses the mtu key. Upstream fails the ADD on a non-integer; a
// value outside what a veth takes is refused here as well.
func (c *NetConf) podMTU() (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(c.MTU))
	if err != nil {
		return 0, fmt.Errorf("mtu %q is not an integer", c.MTU)
	}
	if n < 68 || n > 65535 {
		return 0, fmt.Errorf("mtu %d is outside 68-65535", n)
	}
	return n, nil
}

// chainName is the pod's SNAT chain: CNI-E4- or CNI-E6- and a hash of the
// network name and container ID, 28 characters in all (containernetworking's
// naming, as upstream).
func chainName(f egressFamily, network, containerID string) string {
	return utils.MustFormatChainNameWithPrefix(network, containerID, f.chainPrefix)
}

// ruleComment marks every rule of a pod: name: "<network>" id: "<container>".
func ruleComment(network, containerID string) string {
	return utils.FormatComment(network, containerID)
}

// prevResult returns the result of the plugin before this one, which ADD
// requires (the plugin only works chained).
func (c *NetConf) prevResult(prevErr error) (*current.Result, error) {
	if prevErr != nil {
		return nil, prevErr
	}
	if c.PrevResult == nil {
		return nil, fmt.Errorf("must be called as a chained plugin: no prevResult")
	}
	return current.NewResultFromResult(c.PrevResult)
}
