package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// RenderConflist fills misc/10-aws.conflist's placeholders the way the
// aws-node image's entrypoint does, points the aws-cni entry at the test's
// ipamd socket and DEL queue, and drops portmap unless its binary was built.
func RenderConflist(template string, portmap bool, ipamdSock, queueDir, pluginLog string) ([]byte, error) {
	raw, err := os.ReadFile(template)
	if err != nil {
		return nil, err
	}
	filled := strings.NewReplacer(
		"__VETHPREFIX__", "eni",
		"__MTU__", "9001",
		"__PODSGENFORCINGMODE__", "strict",
		"__PLUGINLOGFILE__", pluginLog,
		"__PLUGINLOGLEVEL__", "Debug",
	).Replace(string(raw))
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
			m["ipamdSocket"] = ipamdSock
			m["delQueueDir"] = queueDir
			found = true
		case "portmap":
			if !portmap {
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
