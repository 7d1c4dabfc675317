package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Conflist says how to render misc/10-aws.conflist for one node.
type Conflist struct {
	Template  string // path of misc/10-aws.conflist
	Portmap   bool   // keep the portmap entry (its binary was built)
	IPAMDSock string // the node's ipamd socket
	QueueDir  string // the plugin's DEL queue
	LockDir   string // the plugin's address locks, shared with the agent
	PluginLog string // aws-cni's log file
	// Egress is the egress-cni entry as the entrypoint renders it: off in
	// an IPv4 cluster (ENABLE_V6_EGRESS unset), IPv4 egress through
	// 169.254.172.0/22 in an IPv6 one.
	IPv6      bool
	NodeIP    string // IPv6 cluster: the node's IPv4 address (egress SNAT)
	EgressLog string
	EgressDir string // host-local's data directory
}

// RenderConflist fills the template's placeholders the way the aws-node
// image's entrypoint does, points the aws-cni entry at the test's ipamd
// socket and DEL queue, and drops portmap unless its binary was built.
func RenderConflist(c Conflist) ([]byte, error) {
	template := c.Template
	raw, err := os.ReadFile(template)
	if err != nil {
		return nil, err
	}
	egress := []string{"__EGRESSPLUGINENABLED__", "false", "__EGRESSPLUGINIPAMSUBNET__", "fd00::ac:00/118",
		"__EGRESSPLUGINIPAMDST__", "::/0", "__NODEIP__", ""}
	if c.IPv6 {
		egress = []string{"__EGRESSPLUGINENABLED__", "true", "__EGRESSPLUGINIPAMSUBNET__", "169.254.172.0/22",
			"__EGRESSPLUGINIPAMDST__", "0.0.0.0/0", "__NODEIP__", c.NodeIP}
	}
	filled := strings.NewReplacer(append([]string{
		"__VETHPREFIX__", "eni",
		"__MTU__", "9001",
		"__PODSGENFORCINGMODE__", "strict",
		"__PLUGINLOGFILE__", c.PluginLog,
		"__PLUGINLOGLEVEL__", "Debug",
		"__EGRESSPLUGINLOGFILE__", c.EgressLog,
		"__EGRESSPLUGINIPAMDATADIR__", c.EgressDir,
		"__RANDOMIZESNAT__", "prng",
	}, egress...)...).Replace(string(raw))
	var conf map[string]any
	if err := json.Unmarshal([]byte(filled), &conf); err != nil {
		return nil, fmt.Errorf("%s: %w", template, err)
	}
	plugins, _ := conf["plugins"].([]any)
	var keep []any
	found := false
	for _, p := range plugins {
		m, ok := p.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: a plugin entry is not an object", template)
		}
		switch m["type"] {
		case "aws-cni":
			m["ipamdSocket"] = c.IPAMDSock
			m["delQueueDir"] = c.QueueDir
			if c.LockDir != "" {
				m["addressLockDir"] = c.LockDir
			}
			found = true
		case "portmap":
			if !c.Portmap {
				continue
			}
		}
		keep = append(keep, m)
	}
	if !found {
		return nil, fmt.Errorf("%s: no aws-cni plugin entry", template)
	}
	conf["plugins"] = keep
	return json.MarshalIndent(conf, "", "  ")
}
