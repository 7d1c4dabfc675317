// Package apiserver runs a real kube-apiserver on etcd for tests: both
// binaries built from the Go module proxy at pinned versions
// (scripts/ci/components.sh), on loopback, in a temporary directory, with
// RBAC on and service-account tokens signed by a key of its own. Tests get
// an admin client (a static token in system:masters) and clients for
// service accounts (TokenRequest), so a request the chart's RBAC does not
// allow is refused as in a cluster. Both processes die with the test binary
// (Pdeathsig) and at cleanup.
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
	URL   string
	dir   string
	procs []*exec.Cmd
}

// Binaries are the paths of the two programs.
type Binaries struct{ Etcd, KubeAPIServer string }

// Start runs etcd and kube-apiserver until the test ends and waits for
// /readyz. Any failure fails the test (a missing binary too: never a skip).
func Start(t testing.TB, bin Binaries) *Server {
	t.Helper()
	for _, b := range []string{bin.Etcd, bin.KubeAPIServer} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("%s: %v (scripts/ci/components.sh builds it; make test runs that as root)", b, err)
		}
	}
	s := &Server{dir: t.TempDir()}
	t.Cleanup(s.stop)
	etcdURL, err := s.startEtcd(bin.Etcd)
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	if err := s.startAPIServer(bin.KubeAPIServer, etcdURL); err != nil {
		t.Fatalf("kube-apiserver: %v", err)
	}
	start := time.Now()
	if err := s.waitReady(90 * time.Second); err != nil {
		t.Fatalf("kube-apiserver not ready: %v\n%s", err, s.logTail("kube-apiserver.log"))
	}
	t.Logf("kube-apiserver ready at %s in %s", s.URL, time.Since(start).Round(time.Millisecond))
	return s
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
	ctx := context.Background()
	c := s.AdminClient(t)
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("namespace %s: %v", namespace, err)
	}
	if _, err := c.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("service account %s/%s: %v", namespace, name, err)
	}
	tr, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	return &rest.Config{Host: s.URL, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

func (s *Server) startEtcd(bin string) (string, error) {
	client, peer := freePort(), freePort()
	url := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	err := s.run("etcd", bin, "--name=default", "--data-dir="+filepath.Join(s.dir, "etcd"),
		"--listen-client-urls="+url, "--advertise-client-urls="+url,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--log-level=warn")
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

func (s *Server) startAPIServer(bin, etcdURL string) error {
	keyFile, pubFile, err := writeServiceAccountKey(s.dir)
	if err != nil {
		return err
	}
	tokens := filepath.Join(s.dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+",e2e-admin,e2e-admin-uid,system:masters\n"), 0o600); err != nil {
		return err
	}
	port := freePort()
	s.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	return s.run("kube-apiserver", bin,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
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
}

// run starts a process logging to <name>.log, to die with the test binary
// (test/spawn).
func (s *Server) run(name, bin string, args ...string) error {
	log, err := os.Create(filepath.Join(s.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := spawn.Start(cmd); err != nil {
		log.Close()
		return err
	}
	s.procs = append(s.procs, cmd)
	return nil
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

// stop ends the processes, the API server first.
func (s *Server) stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	s.procs = nil
}

func (s *Server) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, name))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func writeServiceAccountKey(dir string) (keyFile, pubFile string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyFile, pubFile = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", "", err
	}
	return keyFile, pubFile, os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
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
