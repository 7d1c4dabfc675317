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

// hostVethIPv6Sysctls are set on the node side of every pod veth before it
// comes up: no router advertisements, accept redirects, no forwarding of
// IPv6 by the veth itself.
var hostVethIPv6Sysctls = []struct{ key, value string }{
	{"accept_ra", "0"},
	{"accept_redirects", "1"},
	{"forwarding", "0"},
}

// setHostVethSysctls writes net/ipv6/conf/<link>/* in the plugin's
// namespace. Missing files (IPv6 disabled) are not an error.
func setHostVethSysctls(link string) error {
	for _, s := range hostVethIPv6Sysctls {
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
