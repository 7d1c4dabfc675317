package kubenode

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/aws/amazon-vpc-cni-k8s/test/e2e"
	"github.com/aws/amazon-vpc-cni-k8s/test/netnsutil"
)

// internetAddr is an address outside the VPC (TEST-NET-1) that the
// upstream namespace (the VPC router stand-in) answers for: a destination
// on the internet as the node sees it.
var internetAddr = netip.MustParseAddr("192.0.2.1")

// Kube-proxy, in iptables mode and in nftables mode, and aws-node program
// the same node side by side: a pod reaches a Service through kube-proxy's
// DNAT, a pod's traffic leaving the VPC is SNATed to the node's primary
// address by aws-node's rules while traffic inside the VPC keeps the pod's
// address, and each one's rules are still there (and the traffic still
// flows) after the other restarts.
func TestKubeProxyAndTheAgentsRulesWorkSideBySide(t *testing.T) {
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run("kube-proxy "+mode, func(t *testing.T) {
			start := time.Now()
			n := New(t, Options{ProxyMode: mode})

			// The upstream answers for an internet address and delivers the
			// VPC's replies to pods through the node that owns them.
			if err := AddLocalAddr(n.Box.Net.Upstream, internetAddr); err != nil {
				t.Fatal(err)
			}
			// More pods than the primary ENI has secondary addresses: some
			// pods are on a secondary ENI, whose traffic out of the VPC must
			// leave through the primary ENI (aws-node's connmark rules: the
			// nat PREROUTING chain kube-proxy also uses on a legacy node, the
			// table ip aws-cni after kube-proxy's DNAT otherwise) to be
			// SNATed.
			const replicas = 16
			n.Deployment(t, "proxied", replicas)
			all := n.WaitRunning(t, "app=proxied", replicas, 4*time.Minute)
			pods := podsOnPrimaryAndSecondaryENIs(t, n, all, 2)
			for i := range pods {
				ip, err := PodIP(&pods[i])
				if err != nil {
					t.Fatalf("pod %s: %v", pods[i].Name, err)
				}
				if err := RouteHostVia(n.Box.Net.Upstream, ip, n.IP); err != nil {
					t.Fatal(err)
				}
			}
			svc := kubernetesService(t, n)
			t.Logf("kube-proxy %s: the kubernetes Service is %s", mode, svc)

			stages := 0
			check := func(stage string) {
				t.Helper()
				bothRuleSetsArePresent(t, n, mode, stage)
				serviceDNATReachesItsEndpoint(t, n, pods, svc, stage)
				// A Service made now proves the running kube-proxy programs
				// new Services, not only that earlier rules survived.
				stages++
				fresh := apiServiceAt(t, n, fmt.Sprintf("api-%d", stages))
				serviceDNATReachesItsEndpoint(t, n, pods, fresh, stage+", a Service created then")
				trafficLeavingTheVPCIsSNATedToTheNode(t, n, pods, stage)
				trafficInsideTheVPCKeepsThePodsAddress(t, n, pods, stage)
				trafficLeavesThroughTheRightENI(t, n, pods, stage)
			}
			check("after install")

			restartAgent(t, n)
			check("after aws-node restarted")

			restartKubeProxy(t, n)
			check("after kube-proxy restarted")

			t.Logf("kube-proxy %s: node Ready %s after its start; whole scenario %s", mode,
				n.Ready.Sub(n.Started).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		})
	}
}

// podsOnPrimaryAndSecondaryENIs picks up to each pods whose address is on
// the primary ENI and as many on secondary ENIs; it fails unless both
// kinds are there.
func podsOnPrimaryAndSecondaryENIs(t *testing.T, n *Node, pods []corev1.Pod, each int) []corev1.Pod {
	t.Helper()
	device := map[netip.Addr]int{}
	for _, e := range n.Sim.ENIs() {
		for _, a := range e.SecondaryIPs {
			device[a] = e.DeviceIndex
		}
	}
	var primary, secondary []corev1.Pod
	where := map[string]int{}
	for _, p := range pods {
		ip, err := PodIP(&p)
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		d, ok := device[ip]
		if !ok {
			t.Fatalf("pod %s's address %s is on no ENI of the simulator", p.Name, ip)
		}
		where[p.Name+" "+ip.String()] = d
		if d == 0 && len(primary) < each {
			primary = append(primary, p)
		} else if d > 0 && len(secondary) < each {
			secondary = append(secondary, p)
		}
	}
	if len(primary) == 0 || len(secondary) == 0 {
		t.Fatalf("want pods on the primary ENI and on a secondary one; device index by pod: %v", where)
	}
	t.Logf("pods checked: %d on the primary ENI, %d on a secondary ENI (device index by pod: %v)", len(primary), len(secondary), where)
	return append(primary, secondary...)
}

// kubernetesService is the "kubernetes" Service's ClusterIP:port.
func kubernetesService(t *testing.T, n *Node) string {
	t.Helper()
	s, err := n.Admin.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the kubernetes Service: %v", err)
	}
	if len(s.Spec.Ports) == 0 {
		t.Fatalf("the kubernetes Service has no port")
	}
	return net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(s.Spec.Ports[0].Port)))
}

// apiServiceAt creates a Service without selector whose one endpoint
// (an EndpointSlice made by hand) is the API server behind the node's
// address, and returns its ClusterIP:port.
func apiServiceAt(t *testing.T, n *Node, name string) string {
	t.Helper()
	return serviceTo(t, n, name, n.IP, 8443, int32(n.API.Port()))
}

// Rule: a connection from a pod to a Service IP is DNATed by kube-proxy to
// the Service's endpoint (the API server, behind the node's address) and
// completes: here a TLS handshake with the API server.
func serviceDNATReachesItsEndpoint(t *testing.T, n *Node, pods []corev1.Pod, svc, stage string) {
	t.Helper()
	for i := range pods {
		p := &pods[i]
		withPodNetns(t, n, p, func(nsh ns.NetNS) {
			var err error
			if !poll(60*time.Second, func() bool { err = TLSHandshakeFrom(nsh, svc, 5*time.Second); return err == nil }) {
				t.Errorf("%s: pod %s cannot reach Service %s through kube-proxy's DNAT: %v\nkube-proxy:\n%s",
					stage, p.Name, svc, err, n.Box.LogTail("kube-proxy.log", 3000))
			}
		})
	}
}

// Rule: a pod's traffic to an address outside the VPC leaves the node
// SNATed to the node's primary address (aws-node's SNAT, external SNAT
// off), and the reply finds its way back to the pod.
func trafficLeavingTheVPCIsSNATedToTheNode(t *testing.T, n *Node, pods []corev1.Pod, stage string) {
	t.Helper()
	sources := echoSourcesOf(t, n, pods, internetAddr, stage)
	for _, p := range pods {
		ip, _ := PodIP(&p)
		if slices.Contains(sources, ip) {
			t.Errorf("%s: pod %s's echo to %s (outside the VPC) left the node with the pod's address %s, not SNATed to the node's %s (sources seen: %v)",
				stage, p.Name, internetAddr, ip, n.IP, sources)
		}
	}
	if len(sources) < len(pods) {
		t.Errorf("%s: the upstream saw %d echoes to %s from %d pods", stage, len(sources), internetAddr, len(pods))
	}
	for _, s := range sources {
		if s != n.IP {
			t.Errorf("%s: an echo to %s (outside the VPC) arrived from %s, not from the node's primary address %s\n%s",
				stage, internetAddr, s, n.IP, natTable(n))
			break
		}
	}
}

// Rule: a pod's traffic to an address inside the VPC keeps the pod's
// address as its source (no SNAT).
func trafficInsideTheVPCKeepsThePodsAddress(t *testing.T, n *Node, pods []corev1.Pod, stage string) {
	t.Helper()
	router := netip.MustParsePrefix(nodeSubnet).Addr().Next()
	sources := echoSourcesOf(t, n, pods, router, stage)
	for _, p := range pods {
		ip, _ := PodIP(&p)
		if !slices.Contains(sources, ip) {
			t.Errorf("%s: pod %s's echo to %s (inside the VPC) did not arrive from the pod's address %s (sources seen: %v)",
				stage, p.Name, router, ip, sources)
		}
	}
	if slices.Contains(sources, n.IP) {
		t.Errorf("%s: an echo to %s (inside the VPC) arrived SNATed to the node's %s (sources seen: %v)", stage, router, n.IP, sources)
	}
}

// Rule: a pod's traffic out of the VPC leaves through the primary ENI
// (eth0, where it is SNATed: for a pod on a secondary ENI that is
// aws-node's connmark and fwmark rule at work), and its traffic inside the
// VPC through the ENI that holds its address (EC2 drops a packet whose
// source another ENI owns).
func trafficLeavesThroughTheRightENI(t *testing.T, n *Node, pods []corev1.Pod, stage string) {
	t.Helper()
	const echoes = 10
	router := netip.MustParsePrefix(nodeSubnet).Addr().Next()
	for i := range pods {
		p := &pods[i]
		ip, _ := PodIP(p)
		own := nodeLinkOf(t, n, ip)
		for _, c := range []struct {
			dst  netip.Addr
			what string
			via  string
		}{{internetAddr, "outside the VPC", "eth0"}, {router, "inside the VPC", own}} {
			before := txPackets(t, n, "eth0", own)
			withPodNetns(t, n, p, func(nsh ns.NetNS) {
				for range echoes {
					if err := PingRetry(nsh, c.dst, 3, 5*time.Second); err != nil {
						t.Errorf("%s: pod %s pinging %s: %v", stage, p.Name, c.dst, err)
					}
				}
			})
			after := txPackets(t, n, "eth0", own)
			sent := map[string]uint64{"eth0": after[0] - before[0], own: after[1] - before[1]}
			other := own
			if c.via == own {
				other = "eth0"
			}
			if sent[c.via] < echoes || (other != c.via && sent[other] >= echoes) {
				t.Errorf("%s: pod %s (%s, on the ENI of link %s): %d echoes to %s (%s) left through %s %d times and through %s %d times; want them through %s",
					stage, p.Name, ip, own, echoes, c.dst, c.what, c.via, sent[c.via], other, sent[other], c.via)
			}
		}
	}
}

// echoSourcesOf pings dst from every pod (each must be answered) and
// returns the sources of the echo requests the upstream saw meanwhile.
func echoSourcesOf(t *testing.T, n *Node, pods []corev1.Pod, dst netip.Addr, stage string) []netip.Addr {
	t.Helper()
	w, err := netnsutil.WatchEchoes(n.Box.Net.Upstream, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		p := &pods[i]
		withPodNetns(t, n, p, func(nsh ns.NetNS) {
			if err := PingRetry(nsh, dst, 5, 5*time.Second); err != nil {
				t.Errorf("%s: pod %s pinging %s: %v", stage, p.Name, dst, err)
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // the last echo's copy reaches the watch
	if err := w.Close(); err != nil {
		t.Errorf("the upstream's echo watch: %v", err)
	}
	return w.Sources()
}

// Rule: kube-proxy's rules and aws-node's rules are both in the node;
// neither removed the other's. Polled: a restarted component takes a
// moment to program its rules again.
func bothRuleSetsArePresent(t *testing.T, n *Node, mode, stage string) {
	t.Helper()
	var missing []string
	var nat, tables string
	ok := poll(90*time.Second, func() bool {
		nat, tables = natTable(n), nftTables(n)
		missing = missing[:0]
		want := map[string]bool{
			// aws-node's SNAT rules (nat POSTROUTING → AWS-SNAT-CHAIN-0).
			"aws-node: chain AWS-SNAT-CHAIN-0":                      hasChain(nat, "AWS-SNAT-CHAIN-0"),
			"aws-node: POSTROUTING jump to AWS-SNAT-CHAIN-0":        hasJump(nat, "POSTROUTING", "AWS-SNAT-CHAIN-0"),
			"aws-node: the SNAT rule to the node's primary address": strings.Contains(nat, "--to-source "+n.IP.String()),
		}
		// aws-node's connmark rules, in the backend it chose from the
		// node's `iptables --version`.
		if connmarkBackend(n) == "iptables" {
			want["aws-node: chain AWS-CONNMARK-CHAIN-0"] = hasChain(nat, "AWS-CONNMARK-CHAIN-0")
			want["aws-node: PREROUTING jump to AWS-CONNMARK-CHAIN-0"] = hasJump(nat, "PREROUTING", "AWS-CONNMARK-CHAIN-0")
		} else {
			want["aws-node: table ip aws-cni (nftables connmark)"] = hasLine(tables, "table ip aws-cni")
			want["aws-node: no iptables connmark chain beside it"] = !hasChain(nat, "AWS-CONNMARK-CHAIN-0")
		}
		switch mode {
		case "iptables":
			want["kube-proxy: chain KUBE-SERVICES"] = hasChain(nat, "KUBE-SERVICES")
			want["kube-proxy: PREROUTING jump to KUBE-SERVICES"] = hasJump(nat, "PREROUTING", "KUBE-SERVICES")
			want["kube-proxy: chain KUBE-POSTROUTING"] = hasChain(nat, "KUBE-POSTROUTING")
		case "nftables":
			want["kube-proxy: table ip kube-proxy"] = hasLine(tables, "table ip kube-proxy")
			want["aws-node: table ip nat (iptables-nft)"] = hasLine(tables, "table ip nat")
		}
		for what, ok := range want {
			if !ok {
				missing = append(missing, what)
			}
		}
		slices.Sort(missing)
		return len(missing) == 0
	})
	if !ok {
		t.Errorf("%s (kube-proxy %s): missing from the node after 90 s: %v\n--- iptables-save -t nat\n%s\n--- nft list tables\n%s\n--- kube-proxy.log\n%s",
			stage, mode, missing, nat, tables, n.Box.LogTail("kube-proxy.log", 3000))
		return
	}
	t.Logf("%s (kube-proxy %s): nft tables %q; nat chains %v", stage, mode,
		strings.Split(strings.TrimSpace(tables), "\n"), natChains(nat))
}

// restartAgent deletes the aws-node pod; the DaemonSet makes a new one,
// which must run.
func restartAgent(t *testing.T, n *Node) {
	t.Helper()
	old := n.WaitAgentRunning(t, 3*time.Minute)
	if err := n.Admin.CoreV1().Pods(AgentNamespace).Delete(context.Background(), old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete aws-node pod %s: %v", old.Name, err)
	}
	start := time.Now()
	var p *corev1.Pod
	if !poll(4*time.Minute, func() bool { p = n.AgentPod(); return p != nil && p.UID != old.UID }) {
		t.Fatalf("no new Ready aws-node pod 4 min after %s was deleted\n%s", old.Name, n.Diagnose())
	}
	t.Logf("aws-node restarted: %s replaced %s, Ready in %s", p.Name, old.Name, time.Since(start).Round(time.Millisecond))
}

// restartKubeProxy stops kube-proxy (SIGTERM, as systemd or a DaemonSet
// rollout does) and starts it again.
func restartKubeProxy(t *testing.T, n *Node) {
	t.Helper()
	stopCmd(n.proxy)
	n.startKubeProxy(t)
	t.Logf("kube-proxy restarted (pid %d)", n.proxy.Process.Pid)
}

// withPodNetns runs f with the pod's network namespace open.
func withPodNetns(t *testing.T, n *Node, p *corev1.Pod, f func(ns.NetNS)) {
	t.Helper()
	nsh, err := n.PodNetns(p)
	if err != nil {
		t.Fatalf("pod %s's network namespace: %v", p.Name, err)
	}
	defer nsh.Close()
	f(nsh)
}

// natTable is `iptables-save -t nat` in the node (or the error).
func natTable(n *Node) string {
	out, err := n.Box.Command("iptables-save", "-t", "nat").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("iptables-save -t nat: %v: %s", err, out)
	}
	return string(out)
}

// connmarkBackend is the connmark backend aws-node picks on the node, by
// upstream's rule: "iptables" when the node's `iptables --version` says
// legacy, else "nftables".
func connmarkBackend(n *Node) string {
	out, _ := n.Box.Command("iptables", "--version").CombinedOutput()
	if strings.Contains(string(out), "legacy") {
		return "iptables"
	}
	return "nftables"
}

// nftTables is `nft list tables` in the node (or the error).
func nftTables(n *Node) string {
	out, err := n.Box.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("nft list tables: %v: %s", err, out)
	}
	return string(out)
}

func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// hasChain: iptables-save declares the chain (":NAME - [0:0]").
func hasChain(save, chain string) bool {
	for _, l := range strings.Split(save, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == ":"+chain {
			return true
		}
	}
	return false
}

// hasJump: a rule of chain from jumps to chain to.
func hasJump(save, from, to string) bool {
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "-A "+from+" ") && strings.HasSuffix(strings.TrimSpace(l), "-j "+to) {
			return true
		}
	}
	return false
}

// natChains are the KUBE-* and AWS-* chains iptables-save declares (KUBE-SVC/SEP
// chains folded), for the log.
func natChains(save string) []string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !strings.HasPrefix(f[0], ":") {
			continue
		}
		c := strings.TrimPrefix(f[0], ":")
		if strings.HasPrefix(c, "KUBE-SVC-") || strings.HasPrefix(c, "KUBE-SEP-") {
			continue
		}
		if strings.HasPrefix(c, "KUBE-") || strings.HasPrefix(c, "AWS-") {
			out = append(out, c)
		}
	}
	return out
}

// A connection from a pod on a secondary ENI leaves the node through that
// ENI when its destination is in the VPC (EC2's source/destination check
// drops a packet whose source another ENI owns), and through the primary
// ENI, SNATed, when it is outside the VPC: also when the pod connects to a
// Service whose endpoint is there, with kube-proxy in either mode.
//
// aws-node's connmark must see the destination after kube-proxy's DNAT.
// On this node (iptables-nft) that is the nftables backend's chain at
// priority -90, after kube-proxy's nat chains in either mode (see
// pkg/networkutils/doc.go), so a Service connection to an endpoint in the
// VPC is not marked and leaves through the pod's ENI.
//
// Known gap (that case runs only with KUBENODE_KNOWN_GAPS=1): a Service
// whose endpoint is outside the VPC. The kernel runs a hook's nat chains
// only until one of them NATs the connection, so once kube-proxy's chain
// at -100 DNATs it, the nat-type chain at -90 (upstream's layout) never
// sees it: it is not connmarked and its first packet leaves through the
// secondary ENI with the primary address. A filter-type chain at the same
// priority would see it.
func TestAServiceConnectionFromAPodOnASecondaryENILeavesThroughTheRightENI(t *testing.T) {
	const (
		listen    = 8443
		svcPort   = 80
		conns     = 10
		wrongLink = conns // fewer packets than one per connection on the wrong link
	)
	router := netip.MustParsePrefix(nodeSubnet).Addr().Next()
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run("kube-proxy "+mode, func(t *testing.T) {
			n := New(t, Options{ProxyMode: mode})
			if err := AddLocalAddr(n.Box.Net.Upstream, internetAddr); err != nil {
				t.Fatal(err)
			}
			l, err := e2e.ListenIn(n.Box.Net.Upstream, fmt.Sprintf("0.0.0.0:%d", listen))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					_ = c.Close()
				}
			}()
			n.Deployment(t, "secondary", 16)
			all := n.WaitRunning(t, "app=secondary", 16, 4*time.Minute)
			pod := podsOnPrimaryAndSecondaryENIs(t, n, all, 1)[1]
			podIP, _ := PodIP(&pod)
			if err := RouteHostVia(n.Box.Net.Upstream, podIP, n.IP); err != nil {
				t.Fatal(err)
			}
			eniLink := nodeLinkOf(t, n, podIP)

			for _, c := range []struct {
				what     string
				endpoint netip.Addr
				viaENI   bool // else via eth0
			}{
				{"a Service whose endpoint is in the VPC", router, true},
				{"a Service whose endpoint is outside the VPC", internetAddr, false},
			} {
				if !c.viaENI && os.Getenv("KUBENODE_KNOWN_GAPS") == "" {
					t.Logf("%s: skipped, known gap of the nat-type connmark chain (see the test's comment); KUBENODE_KNOWN_GAPS=1 runs it", c.what)
					continue
				}
				svc := serviceTo(t, n, fmt.Sprintf("to-%s", strings.ReplaceAll(c.endpoint.String(), ".", "-")), c.endpoint, svcPort, listen)
				withPodNetns(t, n, &pod, func(nsh ns.NetNS) {
					// Wait until kube-proxy programs the Service.
					if !poll(60*time.Second, func() bool { return dialFrom(nsh, svc) == nil }) {
						t.Fatalf("pod %s cannot reach %s (%s)", pod.Name, c.what, svc)
					}
					before := txPackets(t, n, "eth0", eniLink)
					for i := 0; i < conns; i++ {
						if err := dialFrom(nsh, svc); err != nil {
							t.Errorf("pod %s to %s (%s): %v", pod.Name, c.what, svc, err)
						}
					}
					after := txPackets(t, n, "eth0", eniLink)
					eth0, eni := after[0]-before[0], after[1]-before[1]
					right, wrong, rightName, wrongName := eni, eth0, eniLink, "eth0 (the primary ENI)"
					if !c.viaENI {
						right, wrong, rightName, wrongName = eth0, eni, "eth0 (the primary ENI)", eniLink
					}
					if right < conns || wrong >= wrongLink {
						t.Errorf("pod %s (%s, on %s) to %s (%s → %s): %d connections sent %d packets through %s and %d through %s; want them through %s",
							pod.Name, podIP, eniLink, c.what, svc, c.endpoint, conns, right, rightName, wrong, wrongName, rightName)
					}
				})
			}
		})
	}
}

// serviceTo creates a Service without selector whose one endpoint is
// addr:target and returns its ClusterIP:port.
func serviceTo(t *testing.T, n *Node, name string, addr netip.Addr, port, target int32) string {
	t.Helper()
	ctx := context.Background()
	s, err := n.Admin.CoreV1().Services(WorkloadNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Port: port, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Service %s: %v", name, err)
	}
	_, err = n.Admin.DiscoveryV1().EndpointSlices(WorkloadNamespace).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("tcp"), Port: ptr(target), Protocol: ptr(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create EndpointSlice of Service %s: %v", name, err)
	}
	return net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(port)))
}

// dialFrom opens and closes a TCP connection from inside a namespace.
func dialFrom(from ns.NetNS, addr string) error {
	return from.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// nodeLinkOf is the node's link of the ENI that holds addr (by its MAC).
func nodeLinkOf(t *testing.T, n *Node, addr netip.Addr) string {
	t.Helper()
	var mac string
	for _, e := range n.Sim.ENIs() {
		if slices.Contains(e.SecondaryIPs, addr) {
			mac = e.MAC
		}
	}
	h, err := netnsutil.HandleAt(n.Box.Net.Node.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if mac != "" && strings.EqualFold(l.Attrs().HardwareAddr.String(), mac) {
			return l.Attrs().Name
		}
	}
	t.Fatalf("no link in the node for the ENI (MAC %q) of %s", mac, addr)
	return ""
}

// txPackets are the named node links' transmitted packet counts.
func txPackets(t *testing.T, n *Node, names ...string) []uint64 {
	t.Helper()
	h, err := netnsutil.HandleAt(n.Box.Net.Node.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	out := make([]uint64, len(names))
	for i, name := range names {
		l, err := h.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = l.Attrs().Statistics.TxPackets
	}
	return out
}
