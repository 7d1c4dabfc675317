package networkutils

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
)

// The nft tool, for tests that read what the kernel holds the way an
// operator would.

// hasNFTTable reports whether `nft list tables` output names the table.
func hasNFTTable(listing, family, name string) bool {
	want := "table " + family + " " + name
	for _, line := range strings.Split(listing, "\n") {
		if strings.TrimSpace(line) == want {
			return true
		}
	}
	return false
}

// runNFT runs the nft tool inside netns. It reports found=false when nft
// is not installed.
func runNFT(netns ns.NetNS, args ...string) (stdout string, found bool, err error) {
	path, lerr := binaryPath("nft")
	if lerr != nil {
		return "", false, nil
	}
	var out, errOut bytes.Buffer
	err = inNetNS(netns, func() error {
		cmd := exec.Command(path, args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		return cmd.Run()
	})
	if err != nil {
		return "", true, fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), true, nil
}
