package config

import (
	"fmt"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pprofserve"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/envutil"
)

// IPAMD_PPROF_ADDRESS, this project's own: where ipamd serves Go's
// net/http/pprof profiles. Unset or blank: nowhere (the default). A
// loopback host:port or unix:<path>; any other address stops ipamd, since
// the profiles show its memory.
const EnvPprofAddress = "IPAMD_PPROF_ADDRESS"

func loadPprofAddress(env envutil.Env) (string, error) {
	v, ok := env.Value(EnvPprofAddress)
	if !ok {
		return "", nil
	}
	addr, err := pprofserve.Address(v)
	if err != nil {
		return "", fmt.Errorf("%s=%q: %w", EnvPprofAddress, v, err)
	}
	return addr, nil
}
