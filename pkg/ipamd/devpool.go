package ipamd

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
)

// DevPool is a DEVELOPMENT-ONLY static pool: synthetic ENIs and addresses
// in 10.250.0.0/16, no EC2. It lets ipamd's gRPC, checkpoint and
// introspection run on a laptop or in tests before the AWS layer is wired.
// Never use it on a real node: the addresses are not attached to anything.
type DevPool struct {
	ENIs   int
	PerENI int // secondary IPs per ENI, or /28 prefixes per ENI in PD mode
}

// ParseDevPool parses "ENISxPERENI", e.g. "3x10".
func ParseDevPool(s string) (DevPool, error) {
	a, b, ok := strings.Cut(strings.ToLower(s), "x")
	enis, err1 := strconv.Atoi(a)
	per, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || enis < 1 || enis > 100 || per < 1 || per > 255 {
		return DevPool{}, fmt.Errorf("dev pool %q: want ENISxPER_ENI with 1-100 ENIs and 1-255 per ENI", s)
	}
	return DevPool{ENIs: enis, PerENI: per}, nil
}

// populate adds the synthetic ENIs and CIDRs to the store.
func (p DevPool) populate(store *datastore.DataStore) error {
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
