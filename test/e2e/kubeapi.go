package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FakeKube is the smallest kube-apiserver ipamd needs: it serves its
// version (what a client's wait for the API server reads), the node
// object (its pod capacity, i.e. max pods, and the labels and annotations
// that pick its ENIConfig), answers a watch on that node, serves ENIConfig
// objects (get and list), and accepts the events ipamd posts, recording
// them. It answers in JSON the way the real API server does (apiVersion,
// kind, metadata.resourceVersion, Status objects on errors), so client-go's
// typed and dynamic clients decode it. It listens inside the node's
// namespace; ipamd finds it through a kubeconfig (KUBECONFIG), since there
// is no in-cluster service account.
type FakeKube struct {
	NodeName string
	MaxPods  int // the node's status.capacity.pods; 0 leaves the status out

	srv  *http.Server
	url  string
	done chan struct{} // closed by Close: ends open watches

	mu          sync.Mutex
	events      []KubeEvent
	rv          int64 // the last resource version handed out
	nodeRV      int64
	labels      map[string]string
	annotations map[string]string
	eniConfigs  map[string]fakeObject
	nodeChanged chan struct{} // closed and replaced whenever the node changes
}

// fakeObject is a stored custom object: its spec and resource version.
type fakeObject struct {
	spec    any
	rv      int64
	created time.Time
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

// The ENIConfig resource the fake serves (charts/aws-vpc-cni/crds).
const (
	eniConfigGroup   = "crd.k8s.amazonaws.com"
	eniConfigVersion = "v1alpha1"
	eniConfigPath    = "/apis/" + eniConfigGroup + "/" + eniConfigVersion + "/eniconfigs"
)

// StartFakeKube serves on l.
func StartFakeKube(l net.Listener, nodeName string, maxPods int) *FakeKube {
	k := &FakeKube{NodeName: nodeName, MaxPods: maxPods, url: "http://" + l.Addr().String(), done: make(chan struct{}),
		rv: 1, nodeRV: 1, eniConfigs: map[string]fakeObject{}, nodeChanged: make(chan struct{})}
	k.srv = &http.Server{Handler: k, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = k.srv.Serve(l) }()
	return k
}

// Close stops the server and ends open watches.
func (k *FakeKube) Close() {
	k.mu.Lock()
	select {
	case <-k.done:
	default:
		close(k.done)
	}
	k.mu.Unlock()
	_ = k.srv.Close()
}

// URL is the server's address, http://host:port.
func (k *FakeKube) URL() string { return k.url }

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

// SetNodeLabels replaces the node's labels (nil: none); watchers see the
// change.
func (k *FakeKube) SetNodeLabels(labels map[string]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.labels = maps.Clone(labels)
	k.nodeModifiedLocked()
}

// SetNodeAnnotations replaces the node's annotations (nil: none);
// watchers see the change.
func (k *FakeKube) SetNodeAnnotations(annotations map[string]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.annotations = maps.Clone(annotations)
	k.nodeModifiedLocked()
}

func (k *FakeKube) nodeModifiedLocked() {
	k.rv++
	k.nodeRV = k.rv
	close(k.nodeChanged)
	k.nodeChanged = make(chan struct{})
}

// PutENIConfig creates or replaces the ENIConfig name with this subnet
// and these security groups.
func (k *FakeKube) PutENIConfig(name, subnet string, securityGroups ...string) {
	spec := map[string]any{"subnet": subnet}
	if len(securityGroups) > 0 {
		spec["securityGroups"] = slices.Clone(securityGroups)
	}
	k.PutENIConfigSpec(name, spec)
}

// PutENIConfigSpec creates or replaces the ENIConfig name with spec served
// as given (JSON-encoded), malformed or not: the real CRD preserves unknown
// fields and does not check IDs, so an agent must cope with what it gets.
// A nil spec serves an object without one.
func (k *FakeKube) PutENIConfigSpec(name string, spec any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.rv++
	created := time.Now()
	if old, ok := k.eniConfigs[name]; ok {
		created = old.created
	}
	k.eniConfigs[name] = fakeObject{spec: spec, rv: k.rv, created: created}
}

// DeleteENIConfig removes the ENIConfig name; it reports whether there
// was one.
func (k *FakeKube) DeleteENIConfig(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.eniConfigs[name]
	if ok {
		delete(k.eniConfigs, name)
		k.rv++
	}
	return ok
}

func (k *FakeKube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	nodePath := "/api/v1/nodes/" + k.NodeName
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/version":
		// What client-go's ServerVersion reads (the agent's wait for the
		// API server at start).
		_ = json.NewEncoder(w).Encode(map[string]string{"major": "1", "minor": "31", "gitVersion": "v1.31.0-e2e",
			"platform": "linux/amd64"})
	case r.Method == http.MethodGet && r.URL.Path == nodePath:
		k.mu.Lock()
		node := k.nodeLocked()
		k.mu.Unlock()
		_ = json.NewEncoder(w).Encode(node)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/nodes/"):
		name := strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/")
		writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("nodes %q not found", name), map[string]any{"name": name, "kind": "nodes"})
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes" && isWatch(r.URL.Query()):
		k.watchNode(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes":
		k.listNodes(w, r)
	case r.Method == http.MethodGet && r.URL.Path == eniConfigPath:
		k.listENIConfigs(w)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, eniConfigPath+"/"):
		k.getENIConfig(w, strings.TrimPrefix(r.URL.Path, eniConfigPath+"/"))
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events"):
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		k.mu.Lock()
		k.events = append(k.events, KubeEvent{At: time.Now(), ContentType: r.Header.Get("Content-Type"), Raw: body})
		k.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "events.k8s.io/v1", "kind": "Event",
			"metadata": map[string]any{"name": "e2e-event", "namespace": "default"}})
	default:
		writeStatus(w, http.StatusNotFound, "NotFound", r.Method+" "+r.URL.Path+" not served by the e2e fake", nil)
	}
}

// nodeLocked is the node as the API server returns it.
func (k *FakeKube) nodeLocked() map[string]any {
	meta := map[string]any{"name": k.NodeName, "uid": "e2e-node-uid", "resourceVersion": strconv.FormatInt(k.nodeRV, 10)}
	if len(k.labels) > 0 {
		meta["labels"] = maps.Clone(k.labels)
	}
	if len(k.annotations) > 0 {
		meta["annotations"] = maps.Clone(k.annotations)
	}
	node := map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": meta}
	if k.MaxPods > 0 { // 0: no pod capacity reported
		node["status"] = map[string]any{
			"capacity":    map[string]string{"pods": strconv.Itoa(k.MaxPods)},
			"allocatable": map[string]string{"pods": strconv.Itoa(k.MaxPods)},
		}
	}
	return node
}

// selectsNode reports whether the request's field selector (if any)
// matches the one node; only metadata.name is understood.
func (k *FakeKube) selectsNode(q url.Values) bool {
	sel := q.Get("fieldSelector")
	if sel == "" {
		return true
	}
	for term := range strings.SplitSeq(sel, ",") {
		f, v, _ := strings.Cut(term, "=")
		v = strings.TrimPrefix(v, "=") // "==" is allowed too
		if f != "metadata.name" || v != k.NodeName {
			return false
		}
	}
	return true
}

func (k *FakeKube) listNodes(w http.ResponseWriter, r *http.Request) {
	k.mu.Lock()
	items := []any{}
	if k.selectsNode(r.URL.Query()) {
		items = append(items, k.nodeLocked())
	}
	rv := k.rv
	k.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "NodeList",
		"metadata": map[string]any{"resourceVersion": strconv.FormatInt(rv, 10)}, "items": items})
}

func isWatch(q url.Values) bool { v := q.Get("watch"); return v == "true" || v == "1" }

// watchNode streams the node's changes as watch events, the way the API
// server does for a watch: one JSON object per event, flushed as sent.
// Asked from resourceVersion "" or "0" it starts with the node as ADDED;
// from an older version than the node's, with the node as MODIFIED. It
// ends at timeoutSeconds, when the client goes, or when the fake closes.
func (k *FakeKube) watchNode(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !k.selectsNode(q) {
		// Nothing else exists to watch: hold the stream open, quietly.
		w.WriteHeader(http.StatusOK)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		select {
		case <-r.Context().Done():
		case <-k.done:
		}
		return
	}
	var timeout <-chan time.Time
	if s, err := strconv.Atoi(q.Get("timeoutSeconds")); err == nil && s > 0 {
		timeout = time.After(time.Duration(s) * time.Second)
	}
	from := q.Get("resourceVersion")
	sent, _ := strconv.ParseInt(from, 10, 64)
	evType := "MODIFIED"
	if from == "" || from == "0" {
		evType, sent = "ADDED", -1
	}
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush() // the client waits for the headers before it waits for events
	}
	enc := json.NewEncoder(w)
	for {
		k.mu.Lock()
		rv, node, changed := k.nodeRV, k.nodeLocked(), k.nodeChanged
		k.mu.Unlock()
		if rv > sent {
			if enc.Encode(map[string]any{"type": evType, "object": node}) != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			sent, evType = rv, "MODIFIED"
		}
		select {
		case <-changed:
		case <-timeout:
			return
		case <-r.Context().Done():
			return
		case <-k.done:
			return
		}
	}
}

// eniConfigLocked is a stored ENIConfig as the API server returns it.
func (k *FakeKube) eniConfigLocked(name string, o fakeObject) map[string]any {
	obj := map[string]any{
		"apiVersion": eniConfigGroup + "/" + eniConfigVersion, "kind": "ENIConfig",
		"metadata": map[string]any{"name": name, "uid": "e2e-eniconfig-" + name, "generation": 1,
			"resourceVersion": strconv.FormatInt(o.rv, 10), "creationTimestamp": o.created.UTC().Format(time.RFC3339)},
	}
	if o.spec != nil {
		obj["spec"] = o.spec
	}
	return obj
}

func (k *FakeKube) getENIConfig(w http.ResponseWriter, name string) {
	k.mu.Lock()
	o, ok := k.eniConfigs[name]
	var obj map[string]any
	if ok {
		obj = k.eniConfigLocked(name, o)
	}
	k.mu.Unlock()
	if !ok {
		writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("eniconfigs.%s %q not found", eniConfigGroup, name),
			map[string]any{"name": name, "group": eniConfigGroup, "kind": "eniconfigs"})
		return
	}
	_ = json.NewEncoder(w).Encode(obj)
}

func (k *FakeKube) listENIConfigs(w http.ResponseWriter) {
	k.mu.Lock()
	items := make([]any, 0, len(k.eniConfigs))
	for _, name := range slices.Sorted(maps.Keys(k.eniConfigs)) {
		items = append(items, k.eniConfigLocked(name, k.eniConfigs[name]))
	}
	rv := k.rv
	k.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": eniConfigGroup + "/" + eniConfigVersion, "kind": "ENIConfigList",
		"metadata": map[string]any{"resourceVersion": strconv.FormatInt(rv, 10)}, "items": items})
}

// writeStatus answers with a failure Status object, as the API server does.
func writeStatus(w http.ResponseWriter, code int, reason, msg string, details map[string]any) {
	st := map[string]any{"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
		"reason": reason, "code": code, "message": msg}
	if details != nil {
		st["details"] = details
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}
