package k8sapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestClientsShareTheConnection builds both clients from a kubeconfig
// naming an address nobody listens on, with CLUSTER_ENDPOINT pointing at a
// real server: both must reach that server with the user agent.
func TestClientsShareTheConnection(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // never in-cluster here
	var mu sync.Mutex
	seen := map[string]string{} // path -> user agent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.UserAgent()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/nodes/n1":
			_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n1"}})
		case "/apis/example.com/v1/widgets/w1":
			_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w1"}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	o := ClientOptions{UserAgent: "aws-k8s-agent-test", Endpoint: srv.URL, Kubeconfig: kubeconfig}

	kube, err := NewClient(o)
	require.NoError(t, err)
	n, err := kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "n1", n.Name)

	dyn, err := NewDynamicClient(o)
	require.NoError(t, err)
	u, err := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}).
		Get(context.Background(), "w1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Widget", u.GetKind())

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]string{"/api/v1/nodes/n1": "aws-k8s-agent-test", "/apis/example.com/v1/widgets/w1": "aws-k8s-agent-test"}, seen)
}

func TestClientsNeedAKubeconfigOutsideACluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := NewClient(ClientOptions{})
	assert.ErrorContains(t, err, "KUBECONFIG unset")
	_, err = NewDynamicClient(ClientOptions{})
	assert.ErrorContains(t, err, "KUBECONFIG unset")
	_, err = NewDynamicClient(ClientOptions{Kubeconfig: filepath.Join(t.TempDir(), "missing")})
	assert.ErrorContains(t, err, "kubeconfig ")
}
