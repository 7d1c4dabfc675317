package driver

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/containernetworking/plugins/pkg/ns"
)

// enablePodIPv6 turns IPv6 on for the container interface and lo inside the
// pod's namespace (net/ipv6/conf/<if>/disable_ipv6=0), as upstream does for
// IPv6 pods. /proc/sys/net follows the writer's namespace, so this is the
// one step that enters the pod's namespace (on a locked thread, through
// containernetworking's ns helper). Missing files (IPv6 compiled out)
// are an error: the pod could not use its address.
func enablePodIPv6(netnsPath, ifName string) error {
	return ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		for _, link := range []string{ifName, "lo"} {
			path := filepath.Join(procSys, "net", "ipv6", "conf", link, "disable_ipv6")
			if err := os.WriteFile(path, []byte("0"), 0o644); err != nil {
				return fmt.Errorf("enable IPv6 on %s in the pod: %w", link, err)
			}
		}
		return nil
	})
}
