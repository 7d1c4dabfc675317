// Package apiserver runs a real kube-apiserver on etcd for tests: both
// binaries built from the Go module proxy at pinned versions
// (scripts/ci/components.sh), on loopback, in a temporary directory, with
// RBAC on and service-account tokens signed by a key of its own. Tests get
// an admin client (a static token in system:masters) and clients for
// service accounts (TokenRequest), so a request the chart's RBAC does not
// allow is refused as in a cluster. Both processes die with the test binary
// (Pdeathsig) and at cleanup.
//
// In cluster mode (LaunchCluster, StartCluster) the server is set up for a
// real node instead: Node and RBAC authorization, NodeRestriction and
// ServiceAccount admission, a serving certificate from a CA of its own, static
// tokens for nodes, kube-proxy and the controllers, and, when their binaries
// are given, kube-controller-manager and kube-scheduler beside it.
package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/aws/amazon-vpc-cni-k8s/test/spawn"
)

// adminToken is the static token of the test's admin (group system:masters).
const adminToken = "e2e-admin-token"

// Server is a running kube-apiserver with its etcd.
type Server struct {
	// URL is the API server's https address (self-signed certificate).
	URL       string
	dir       string
	bin       Binaries
	etcdURL   string
	port      int
	etcd      *proc
	apiserver *proc

	cluster   *ClusterOptions   // cluster mode (LaunchCluster), defaults filled in
	tokens    map[string]string // cluster mode: Kubeconfig user -> static token
	kcm       *proc
	scheduler *proc

	apiserverTook, controllersTook time.Duration // LaunchCluster's start-up
}

// proc is a started process and the end of its Wait.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Binaries are the paths of the programs. ControllerManager and Scheduler
// are optional and only used by LaunchCluster.
type Binaries struct {
	Etcd, KubeAPIServer          string
	ControllerManager, Scheduler string
}

// Start runs etcd and kube-apiserver until the test ends and waits for
// /readyz. Any failure fails the test (a missing binary too: never a skip).
func Start(t testing.TB, bin Binaries) *Server {
	t.Helper()
	start := time.Now()
	s, err := Launch(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	t.Logf("kube-apiserver ready at %s in %s", s.URL, time.Since(start).Round(time.Millisecond))
	return s
}

// Launch runs etcd and kube-apiserver with their files in dir (which must
// exist) and waits for /readyz; the caller stops them (Stop). Shared by
// the tests of one binary (the e2e suite), it outlives any one test.
func Launch(bin Binaries, dir string) (*Server, error) {
	return launch(bin, dir, nil, []string{bin.Etcd, bin.KubeAPIServer})
}

// launch checks that every binary of need exists, then runs etcd and
// kube-apiserver (in cluster mode when cluster is set) and waits for
// /readyz.
func launch(bin Binaries, dir string, cluster *ClusterOptions, need []string) (*Server, error) {
	for _, b := range need {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%s: %v (scripts/ci/components.sh builds it; make test runs that as root)", b, err)
		}
	}
	s := &Server{dir: dir, bin: bin, cluster: cluster}
	etcdURL, err := s.startEtcd(bin.Etcd)
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("etcd: %w", err)
	}
	s.etcdURL = etcdURL
	if err := s.startAPIServer(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("kube-apiserver: %w", err)
	}
	if err := s.waitReady(90 * time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("kube-apiserver not ready: %v\n%s", err, s.logTail("kube-apiserver.log"))
	}
	return s, nil
}

// RestartAPIServer stops kube-apiserver (SIGTERM) and starts it again on
// the same port, etcd and keys (so objects and tokens survive, as in a
// control-plane upgrade), after down has passed; it returns once /readyz
// answers again.
func (s *Server) RestartAPIServer(down time.Duration) error {
	if s.apiserver == nil {
		return fmt.Errorf("kube-apiserver is not running")
	}
	stopProc(s.apiserver)
	s.apiserver = nil
	time.Sleep(down)
	if err := s.startAPIServer(); err != nil {
		return err
	}
	return s.waitReady(90 * time.Second)
}

// CAFile is the API server's self-signed serving certificate (valid for
// 127.0.0.1), for a client that verifies it; in cluster mode, the CA
// (CACertFile).
func (s *Server) CAFile() string {
	if s.cluster != nil {
		return s.CACertFile()
	}
	return filepath.Join(s.dir, "certs", "apiserver.crt")
}

// Admin is a client config with every permission.
func (s *Server) Admin() *rest.Config {
	return &rest.Config{Host: s.URL, BearerToken: adminToken, TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS: 100, Burst: 200}
}

// AdminClient is a clientset on Admin.
func (s *Server) AdminClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.Admin())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ServiceAccount creates (if missing) the service account and returns a
// client config authenticated as it, with a token from TokenRequest.
func (s *Server) ServiceAccount(t testing.TB, namespace, name string) *rest.Config {
	t.Helper()
	cfg, err := s.ServiceAccountConfig(context.Background(), namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// ServiceAccountConfig is ServiceAccount without a test: the namespace and
// service account are created if missing, the token lasts an hour.
func (s *Server) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	c, err := kubernetes.NewForConfig(s.Admin())
	if err != nil {
		return nil, err
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("namespace %s: %w", namespace, err)
	}
	if _, err := c.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("service account %s/%s: %w", namespace, name, err)
	}
	tr, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for %s/%s: %w", namespace, name, err)
	}
	return &rest.Config{Host: s.URL, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, nil
}

func (s *Server) startEtcd(bin string) (string, error) {
	client, peer := freePort(), freePort()
	url := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	cmd, err := s.run("etcd", bin, "--name=default", "--data-dir="+filepath.Join(s.dir, "etcd"),
		"--listen-client-urls="+url, "--advertise-client-urls="+url,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--log-level=warn")
	s.etcd = cmd
	if err != nil {
		return "", err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("not healthy after 30 s\n%s", s.logTail("etcd.log"))
}

func (s *Server) startAPIServer() error {
	if s.cluster != nil {
		return s.startClusterAPIServer()
	}
	keyFile, pubFile := filepath.Join(s.dir, "sa.key"), filepath.Join(s.dir, "sa.pub")
	tokens := filepath.Join(s.dir, "tokens.csv")
	if s.port == 0 {
		if err := writeServiceAccountKey(keyFile, pubFile); err != nil {
			return err
		}
		if err := os.WriteFile(tokens, []byte(adminToken+",e2e-admin,e2e-admin-uid,system:masters\n"), 0o600); err != nil {
			return err
		}
		s.port = freePort()
		s.URL = "https://127.0.0.1:" + strconv.Itoa(s.port)
	}
	cmd, err := s.run("kube-apiserver", s.bin.KubeAPIServer,
		"--etcd-servers="+s.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(s.port),
		"--cert-dir="+filepath.Join(s.dir, "certs"),
		"--authorization-mode=RBAC", "--token-auth-file="+tokens,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+pubFile, "--service-account-signing-key-file="+keyFile,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true", // as every cluster aws-node runs in
		// No controller manager creates namespaces' default service
		// accounts: pods are created without one.
		"--disable-admission-plugins=ServiceAccount",
		"--v=0")
	s.apiserver = cmd
	return err
}

// run starts a process appending to <name>.log, to die with the test
// binary (test/spawn: its parent-death signal follows a thread that lives
// as long as the binary; before, the end of the forking thread killed the
// server in the middle of the tests).
func (s *Server) run(name, bin string, args ...string) (*proc, error) {
	log, err := os.OpenFile(filepath.Join(s.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := spawn.Start(cmd); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (s *Server) waitReady(timeout time.Duration) error {
	c, err := rest.HTTPClientFor(s.Admin())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		resp, err := c.Get(s.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz: %s", resp.Status)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// Stop ends the processes: the controllers, the API server, etcd.
func (s *Server) Stop() {
	s.StopControllers()
	stopProc(s.apiserver)
	stopProc(s.etcd)
	s.apiserver, s.etcd = nil, nil
}

// stopProc ends a process group: SIGTERM, SIGKILL after 10 s.
func stopProc(p *proc) {
	if p == nil {
		return
	}
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.done
	}
}

func (s *Server) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, name))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func writeServiceAccountKey(keyFile, pubFile string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// freePort is a loopback TCP port nothing listens on right now.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func ptr[T any](v T) *T { return &v }
