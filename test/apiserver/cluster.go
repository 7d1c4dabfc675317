package apiserver

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ClusterOptions configure a server for a real node (kubelet, controllers).
type ClusterOptions struct {
	// AdvertiseAddress is the node-side IP the "kubernetes" Service's
	// endpoints name (e.g. the node's primary IP); the API server still
	// binds 127.0.0.1 only.
	AdvertiseAddress string
	// Nodes get a static token each: user system:node:<name>, group
	// system:nodes (Kubeconfig("node:<name>", ...)).
	Nodes []string
	// ServiceCIDR is the service cluster IP range; default DefaultServiceCIDR.
	ServiceCIDR string
}

// DefaultServiceCIDR is ClusterOptions.ServiceCIDR when unset.
const DefaultServiceCIDR = "10.96.0.0/16"

// Kubeconfig users besides "admin" and "node:<name>".
const (
	userKubeProxy         = "kube-proxy"
	userControllerManager = "kube-controller-manager"
	userScheduler         = "kube-scheduler"
)

// StartCluster is LaunchCluster in a temporary directory of the test,
// stopped at cleanup; any failure fails the test.
func StartCluster(t testing.TB, bin Binaries, o ClusterOptions) *Server {
	t.Helper()
	start := time.Now()
	s, err := LaunchCluster(bin, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	t.Logf("cluster ready at %s in %s (kube-apiserver %s, then controllers %s)", s.URL,
		time.Since(start).Round(time.Millisecond), s.apiserverTook.Round(time.Millisecond), s.controllersTook.Round(time.Millisecond))
	return s
}

// LaunchCluster runs etcd and kube-apiserver in cluster mode (see the
// package comment) with their files in dir (which must exist), waits for
// /readyz, then starts kube-controller-manager and kube-scheduler when their
// binaries are given and waits for their /healthz. The caller stops
// everything (Stop).
func LaunchCluster(bin Binaries, dir string, o ClusterOptions) (*Server, error) {
	adv := net.ParseIP(o.AdvertiseAddress)
	if adv == nil {
		return nil, fmt.Errorf("cluster: AdvertiseAddress %q is not an IP address", o.AdvertiseAddress)
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = DefaultServiceCIDR
	}
	if _, err := serviceIP(o.ServiceCIDR); err != nil {
		return nil, err
	}
	o.Nodes = append([]string(nil), o.Nodes...)
	for _, n := range o.Nodes {
		if n == "" || strings.ContainsAny(n, ",\"\n") {
			return nil, fmt.Errorf("cluster: bad node name %q", n)
		}
	}
	bins := []string{bin.Etcd, bin.KubeAPIServer}
	for _, b := range []string{bin.ControllerManager, bin.Scheduler} {
		if b != "" {
			bins = append(bins, b)
		}
	}
	start := time.Now()
	s, err := launch(bin, dir, &o, bins)
	if err != nil {
		return nil, err
	}
	s.apiserverTook = time.Since(start)
	start = time.Now()
	if bin.ControllerManager != "" {
		if s.kcm, err = s.startControllerManager(); err != nil {
			s.Stop()
			return nil, fmt.Errorf("kube-controller-manager: %w", err)
		}
	}
	if bin.Scheduler != "" {
		if s.scheduler, err = s.startScheduler(); err != nil {
			s.Stop()
			return nil, fmt.Errorf("kube-scheduler: %w", err)
		}
	}
	s.controllersTook = time.Since(start)
	return s, nil
}

// Port is the API server's secure port (on 127.0.0.1).
func (s *Server) Port() int { return s.port }

// ServiceIP is the first address of the service CIDR, the ClusterIP of the
// "kubernetes" Service (e.g. 10.96.0.1); "" outside cluster mode.
func (s *Server) ServiceIP() string {
	if s.cluster == nil {
		return ""
	}
	ip, _ := serviceIP(s.cluster.ServiceCIDR)
	return ip.String()
}

// CACertFile is the PEM of the CA that signed the serving certificate (valid
// for 127.0.0.1, AdvertiseAddress, ServiceIP and the kubernetes.default.svc
// names): kube-controller-manager's --root-ca-file, so the ca.crt of pods'
// service-account volumes. Outside cluster mode it is CAFile.
func (s *Server) CACertFile() string {
	if s.cluster == nil {
		return s.CAFile()
	}
	return certFiles(s.dir).CACert
}

// Kubeconfig is a kubeconfig (YAML) for a static-token user: "admin",
// "kube-proxy" or "node:<name>" for a name in ClusterOptions.Nodes. server
// is the URL the client will use (e.g. "https://10.0.0.10:<Port>"); the
// kubeconfig skips TLS verification.
func (s *Server) Kubeconfig(user, server string) ([]byte, error) {
	return s.kubeconfig(user, server, "")
}

// kubeconfig verifies the server with caFile, unless it is "".
func (s *Server) kubeconfig(user, server, caFile string) ([]byte, error) {
	token, ok := s.tokens[user]
	if user == "admin" {
		token, ok = adminToken, true
	}
	if !ok {
		var known []string
		for u := range s.tokens {
			known = append(known, u)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("kubeconfig: no static token for user %q (have admin %s)", user, strings.Join(known, " "))
	}
	cluster := &clientcmdapi.Cluster{Server: server}
	if caFile == "" {
		cluster.InsecureSkipTLSVerify = true
	} else {
		cluster.CertificateAuthority = caFile
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = cluster
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	cfg.CurrentContext = "e2e"
	return clientcmd.Write(*cfg)
}

// StopControllers stops kube-controller-manager and kube-scheduler (what
// was started of them); the API server and etcd keep running.
func (s *Server) StopControllers() {
	stopProc(s.kcm)
	stopProc(s.scheduler)
	s.kcm, s.scheduler = nil, nil
}

// startClusterAPIServer is startAPIServer in cluster mode; the first time
// it writes the keys, certificates and tokens and picks the port.
func (s *Server) startClusterAPIServer() error {
	o := s.cluster
	keyFile, pubFile := filepath.Join(s.dir, "sa.key"), filepath.Join(s.dir, "sa.pub")
	tokens := filepath.Join(s.dir, "tokens.csv")
	certs := certFiles(s.dir)
	if s.port == 0 {
		if err := writeServiceAccountKey(keyFile, pubFile); err != nil {
			return err
		}
		svcIP, _ := serviceIP(o.ServiceCIDR)
		ips := []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(o.AdvertiseAddress), net.IP(svcIP.AsSlice())}
		if _, err := writeClusterCerts(s.dir, ips); err != nil {
			return err
		}
		if err := s.writeClusterTokens(tokens); err != nil {
			return err
		}
		s.port = freePort()
		s.URL = "https://127.0.0.1:" + strconv.Itoa(s.port)
	}
	cmd, err := s.run("kube-apiserver", s.bin.KubeAPIServer,
		"--etcd-servers="+s.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address="+o.AdvertiseAddress, "--secure-port="+strconv.Itoa(s.port),
		"--tls-cert-file="+certs.ServingCert, "--tls-private-key-file="+certs.ServingKey,
		"--client-ca-file="+certs.CACert, // certificates kube-controller-manager signs (CSRs) authenticate
		"--authorization-mode=Node,RBAC", "--token-auth-file="+tokens,
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+pubFile, "--service-account-signing-key-file="+keyFile,
		"--service-cluster-ip-range="+o.ServiceCIDR,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--allow-privileged=true",
		"--v=0")
	s.apiserver = cmd
	return err
}

// writeClusterTokens writes tokens.csv: admin as in Launch, then a random
// token for each node, kube-proxy and the two controllers (users the
// bootstrap RBAC policy binds: system:node-proxier, system:kube-controller-
// manager, system:kube-scheduler).
func (s *Server) writeClusterTokens(path string) error {
	s.tokens = map[string]string{}
	lines := []string{adminToken + ",e2e-admin,e2e-admin-uid,system:masters"}
	add := func(key, user, group string) error {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		token := hex.EncodeToString(b)
		s.tokens[key] = token
		line := token + "," + user + "," + user + "-uid"
		if group != "" {
			line += "," + group
		}
		lines = append(lines, line)
		return nil
	}
	for _, n := range s.cluster.Nodes {
		if err := add("node:"+n, "system:node:"+n, "system:nodes"); err != nil {
			return err
		}
	}
	for _, u := range []string{userKubeProxy, userControllerManager, userScheduler} {
		if err := add(u, "system:"+u, ""); err != nil {
			return err
		}
	}
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// writeKubeconfig writes <dir>/<user>.kubeconfig for a controller, which
// verifies the server with the CA.
func (s *Server) writeKubeconfig(user string) (string, error) {
	b, err := s.kubeconfig(user, s.URL, s.CACertFile())
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.dir, user+".kubeconfig")
	return path, os.WriteFile(path, b, 0o600)
}

func (s *Server) startControllerManager() (*proc, error) {
	kc, err := s.writeKubeconfig(userControllerManager)
	if err != nil {
		return nil, err
	}
	certs := certFiles(s.dir)
	port := freePort()
	p, err := s.run(userControllerManager, s.bin.ControllerManager,
		"--kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--use-service-account-credentials=true",
		"--root-ca-file="+certs.CACert,
		"--service-account-private-key-file="+filepath.Join(s.dir, "sa.key"),
		"--cluster-signing-cert-file="+certs.CACert, "--cluster-signing-key-file="+certs.CAKey,
		"--leader-elect=false", "--controllers=*", "--allocate-node-cidrs=false",
		"--v=0")
	if err != nil {
		return p, err
	}
	return p, s.waitHealthy(p, userControllerManager, port, 90*time.Second)
}

func (s *Server) startScheduler() (*proc, error) {
	kc, err := s.writeKubeconfig(userScheduler)
	if err != nil {
		return nil, err
	}
	port := freePort()
	p, err := s.run(userScheduler, s.bin.Scheduler,
		"--kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--leader-elect=false",
		"--v=0")
	if err != nil {
		return p, err
	}
	return p, s.waitHealthy(p, userScheduler, port, 90*time.Second)
}

// waitHealthy waits for a controller's /healthz on 127.0.0.1:port.
func (s *Server) waitHealthy(p *proc, name string, port int, timeout time.Duration) error {
	c := &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // its self-signed certificate
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	deadline := time.Now().Add(timeout)
	last := fmt.Errorf("no answer")
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("exited: %v\n%s", p.cmd.ProcessState, s.logTail(name+".log"))
		default:
		}
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/healthz: %s", resp.Status)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not healthy after %s: %v\n%s", timeout, last, s.logTail(name+".log"))
}

// serviceIP is the first address of cidr.
func serviceIP(cidr string) (netip.Addr, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("cluster: ServiceCIDR: %w", err)
	}
	ip := p.Masked().Addr().Next()
	if !ip.IsValid() || !p.Contains(ip) {
		return netip.Addr{}, fmt.Errorf("cluster: ServiceCIDR %s has no first address", cidr)
	}
	return ip, nil
}
