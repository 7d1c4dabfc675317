package vmnode

import (
	"net"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// trafficTimeout bounds each traffic check: generous, as the VM emulates
// its CPU.
const trafficTimeout = 30 * time.Second

// ping sends echoes from one namespace to dst until one is answered.
func ping(from ns.NetNS, dst net.IP) error { return netnsutil.PingWithin(from, dst, trafficTimeout) }

// tcpEcho passes a line over TCP from client to ip in server and back.
func tcpEcho(server ns.NetNS, ip net.IP, client ns.NetNS) error {
	return netnsutil.TCPEcho(server, ip, client, trafficTimeout)
}
