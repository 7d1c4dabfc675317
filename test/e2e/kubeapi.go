package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FakeKube is the smallest kube-apiserver ipamd needs: it serves the node
// object (for its pod capacity, i.e. max pods) and accepts the events ipamd
// posts, recording them. It listens inside the node's namespace; ipamd finds
// it through a kubeconfig (KUBECONFIG), since there is no in-cluster
// service account.
type FakeKube struct {
	NodeName string
	MaxPods  int

	srv *http.Server
	url string

	mu     sync.Mutex
	events []KubeEvent
}

// KubeEvent is one event ipamd posted. Client-go may send protobuf, which
// this fake does not decode: Raw keeps the body, and Mentions looks for a
// string in it (protobuf carries strings verbatim).
type KubeEvent struct {
	At          time.Time
	ContentType string
	Raw         []byte
}

// Mentions reports whether the event's body contains s.
func (e KubeEvent) Mentions(s string) bool { return bytes.Contains(e.Raw, []byte(s)) }

// StartFakeKube serves on l.
func StartFakeKube(l net.Listener, nodeName string, maxPods int) *FakeKube {
	k := &FakeKube{NodeName: nodeName, MaxPods: maxPods, url: "http://" + l.Addr().String()}
	k.srv = &http.Server{Handler: k, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = k.srv.Serve(l) }()
	return k
}

// Close stops the server.
func (k *FakeKube) Close() { _ = k.srv.Close() }

// WriteKubeconfig writes a kubeconfig pointing at the server.
func (k *FakeKube) WriteKubeconfig(path string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
users:
- name: e2e
  user: {}
contexts:
- name: e2e
  context:
    cluster: e2e
    user: e2e
current-context: e2e
`, k.url)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// Events returns the events posted so far.
func (k *FakeKube) Events() []KubeEvent {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]KubeEvent(nil), k.events...)
}

func (k *FakeKube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes/"+k.NodeName:
		node := map[string]any{
			"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": k.NodeName, "uid": "e2e-node-uid"},
			"status": map[string]any{
				"capacity":    map[string]string{"pods": strconv.Itoa(k.MaxPods)},
				"allocatable": map[string]string{"pods": strconv.Itoa(k.MaxPods)},
			},
		}
		_ = json.NewEncoder(w).Encode(node)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events"):
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		k.mu.Lock()
		k.events = append(k.events, KubeEvent{At: time.Now(), ContentType: r.Header.Get("Content-Type"), Raw: body})
		k.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "events.k8s.io/v1", "kind": "Event",
			"metadata": map[string]any{"name": "e2e-event", "namespace": "default"}})
	default:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
			"reason": "NotFound", "code": 404, "message": r.Method + " " + r.URL.Path + " not served by the e2e fake"})
	}
}
