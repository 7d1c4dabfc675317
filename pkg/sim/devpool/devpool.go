// Package devpool is a DEVELOPMENT-ONLY static pool of synthetic ENIs and
// addresses for ipamd's datastore (aws-k8s-agent -dev-static-pool, tests):
// no EC2 behind it. It never touches the host, and never imports the agent
// or its jobs (pkg/ipamd, pool, podip, rpcserver): it only fills a
// datastore. Of the production code, only pkg/ipamd and cmd/aws-k8s-agent
// import it.
package devpool

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// Pool is a DEVELOPMENT-ONLY static pool: synthetic ENIs and addresses
// in 10.250.0.0/16, no EC2. It lets ipamd's gRPC, checkpoint and
// introspection run on a laptop or in tests before the AWS layer is wired.
// Never use it on a real node: the addresses are not attached to anything.
type Pool struct {
	ENIs   int
	PerENI int // secondary IPs per ENI, or /28 prefixes per ENI in PD mode
}

// Parse parses "ENISxPERENI", e.g. "3x10".
func Parse(s string) (Pool, error) {
	a, b, ok := strings.Cut(strings.ToLower(s), "x")
	enis, err1 := strconv.Atoi(a)
	per, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || enis < 1 || enis > 100 || per < 1 || per > 255 {
		return Pool{}, fmt.Errorf("dev pool %q: want ENISxPER_ENI with 1-100 ENIs and 1-255 per ENI", s)
	}
	return Pool{ENIs: enis, PerENI: per}, nil
}

// Populate adds the synthetic ENIs and CIDRs to the store.
func (p Pool) Populate(store *datastore.DataStore) error {
	for i := range p.ENIs {
		id := fmt.Sprintf("eni-dev%013d", i)
		table := 254 // the primary ENI routes through the main table
		if i > 0 {
			table = i + 1
		}
		subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 250, 0, 0}), 16)
		if err := store.AddENI(datastore.ENIInfo{ID: id, DeviceNumber: i, Primary: i == 0, Subnet: subnet, RouteTableID: table, SubnetID: "subnet-dev"}); err != nil {
			return err
		}
		for j := range p.PerENI {
			var c netip.Prefix
			if store.PrefixDelegation() {
				// /28s: 10.250.(128+i).(16*j)
				if j >= 16 {
					return fmt.Errorf("dev pool: at most 16 prefixes per ENI")
				}
				c = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 250, byte(128 + i), byte(16 * j)}), 28)
			} else {
				c = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 250, byte(i), byte(j + 1)}), 32)
			}
			if err := store.AddCIDR(id, c); err != nil {
				return err
			}
		}
	}
	return nil
}
