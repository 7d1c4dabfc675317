package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// procSys is where the kernel's sysctls live.
const procSys = "/proc/sys"

// linkIPv6Sysctls are set on the node side of every pod veth and on every
// branch ENI's VLAN link before it comes up: no router advertisements,
// accept redirects, no forwarding of IPv6 by the link itself.
var linkIPv6Sysctls = []struct{ key, value string }{
	{"accept_ra", "0"},
	{"accept_redirects", "1"},
	{"forwarding", "0"},
}

// setLinkIPv6Sysctls writes net/ipv6/conf/<link>/* in the plugin's
// namespace. Missing files (IPv6 disabled) are not an error.
func setLinkIPv6Sysctls(link string) error {
	for _, s := range linkIPv6Sysctls {
		path := filepath.Join(procSys, "net", "ipv6", "conf", link, s.key)
		if err := os.WriteFile(path, []byte(s.value), 0o644); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return fmt.Errorf("sysctl %s=%s: %w", path, s.value, err)
		}
	}
	return nil
}
