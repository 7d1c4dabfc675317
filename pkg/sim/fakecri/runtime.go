package fakecri

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandbox is the fake runtime's record of one pod sandbox.
type Sandbox struct {
	ID        string
	Name      string
	Namespace string
	UID       string
	Attempt   uint32
	State     runtimeapi.PodSandboxState
	// IP is the primary pod IP; empty means the sandbox has no IP.
	IP string
	// AdditionalIPs are reported in Network.AdditionalIps (dual stack).
	AdditionalIPs []string
	Labels        map[string]string
	Annotations   map[string]string
	CreatedAt     time.Time
	// Hidden models a sandbox whose CNI ADD is still in flight: it is not
	// listed and PodSandboxStatus answers NotFound until Show is called.
	Hidden bool
}

// clone returns a deep copy so callers never share maps or slices with the
// runtime's state.
func (sb Sandbox) clone() Sandbox {
	sb.AdditionalIPs = slices.Clone(sb.AdditionalIPs)
	sb.Labels = maps.Clone(sb.Labels)
	sb.Annotations = maps.Clone(sb.Annotations)
	return sb
}

// IPHook decides the IP a sandbox created by RunPodSandbox gets. It is
// called while the new sandbox is still hidden, as a CNI ADD would be. An
// empty ip means no IP; a non-nil error makes RunPodSandbox fail and the
// sandbox is discarded.
type IPHook func(meta *runtimeapi.PodSandboxMetadata) (ip string, err error)

// Runtime is a fake CRI runtime. Create it with New.
type Runtime struct {
	mu        sync.Mutex
	sandboxes map[string]*Sandbox
	ipHook    IPHook
	// encoded caches each sandbox's PodSandbox encoding, order the
	// sandboxes sorted as listed and all the unfiltered list (nil when
	// stale), for encodedList.
	encoded map[string][]byte
	order   []*Sandbox
	all     encodedList
	// omitted are sandboxes ListPodSandbox leaves out while PodSandboxStatus
	// still describes them (OmitFromList): a partial answer.
	omitted map[string]bool

	faults faults
	// name is what Version reports as RuntimeName (SetRuntimeName).
	name string

	srvMu    sync.Mutex
	srv      *grpc.Server
	socket   string
	stopping chan struct{}
}

// New returns an empty runtime that is not serving yet.
func New() *Runtime {
	return &Runtime{
		sandboxes: make(map[string]*Sandbox),
		encoded:   make(map[string][]byte),
		faults:    faults{calls: make(map[string]int)},
		name:      DefaultRuntimeName,
	}
}

// DefaultRuntimeName is the RuntimeName Version reports unless
// SetRuntimeName changes it.
const DefaultRuntimeName = "fakecri"

// SetRuntimeName sets the RuntimeName Version reports, so a test can
// present the fake as a given runtime ("containerd", "cri-o"). It changes
// nothing else the fake does.
func (r *Runtime) SetRuntimeName(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.name = name
}

func (r *Runtime) runtimeName() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.name
}

// newID returns a random 64-hex-digit ID, the shape containerd uses.
func newID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("fakecri: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// SetIPHook sets the hook RunPodSandbox uses to pick a sandbox IP. A nil
// hook (the default) means sandboxes get no IP.
func (r *Runtime) SetIPHook(h IPHook) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ipHook = h
}

// Add stores sb and returns the stored copy. An empty ID is replaced by a
// generated one and a zero CreatedAt by the current time. An existing
// sandbox with the same ID is replaced.
func (r *Runtime) Add(sb Sandbox) Sandbox {
	sb = sb.clone()
	if sb.ID == "" {
		sb.ID = newID()
	}
	if sb.CreatedAt.IsZero() {
		sb.CreatedAt = time.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	stored := sb
	r.sandboxes[sb.ID] = &stored
	r.changedLocked(sb.ID, true)
	return sb.clone()
}

// Show makes a hidden sandbox visible, as when its CNI ADD completes.
// Unknown IDs are ignored.
func (r *Runtime) Show(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sb, ok := r.sandboxes[id]; ok {
		sb.Hidden = false
		r.changedLocked(id, false)
	}
}

// ShowWithIP sets a sandbox's IP and makes it visible, as a runtime does
// when the CNI ADD returns. Unknown IDs are ignored.
func (r *Runtime) ShowWithIP(id, ip string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sb, ok := r.sandboxes[id]; ok {
		sb.IP = ip
		sb.Hidden = false
		r.changedLocked(id, false)
	}
}

// OmitFromList makes ListPodSandbox leave sandbox id out (omit true) or
// list it again (false), while PodSandboxStatus keeps describing it: a
// runtime whose list answer is partial. Unlike Hidden (an ADD in flight),
// the sandbox exists and says so when asked by its ID.
func (r *Runtime) OmitFromList(id string, omit bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if omit {
		if r.omitted == nil {
			r.omitted = map[string]bool{}
		}
		r.omitted[id] = true
	} else {
		delete(r.omitted, id)
	}
	r.changedLocked(id, false)
}

// SetState changes a sandbox's state. Unknown IDs are ignored.
func (r *Runtime) SetState(id string, s runtimeapi.PodSandboxState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sb, ok := r.sandboxes[id]; ok {
		sb.State = s
		r.changedLocked(id, false)
	}
}

// Remove deletes a sandbox. Unknown IDs are ignored.
func (r *Runtime) Remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sandboxes, id)
	r.changedLocked(id, true)
}

// Sandboxes returns copies of all sandboxes, hidden ones included, ordered
// by creation time and then ID.
func (r *Runtime) Sandboxes() []Sandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Sandbox, 0, len(r.sandboxes))
	for _, sb := range r.sandboxes {
		out = append(out, sb.clone())
	}
	sortSandboxes(out)
	return out
}

// visible returns copies of the sandboxes a list shows (not hidden, not
// omitted), in the same order as Sandboxes.
func (r *Runtime) visible() []Sandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Sandbox, 0, len(r.sandboxes))
	for _, sb := range r.sandboxes {
		if !sb.Hidden && !r.omitted[sb.ID] {
			out = append(out, sb.clone())
		}
	}
	sortSandboxes(out)
	return out
}

// lookupVisible returns a copy of a visible sandbox.
func (r *Runtime) lookupVisible(id string) (Sandbox, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.sandboxes[id]
	if !ok || sb.Hidden {
		return Sandbox{}, false
	}
	return sb.clone(), true
}

// setIPAndShow records the IP chosen for a sandbox, makes it visible, and
// reports whether the sandbox still exists.
func (r *Runtime) setIPAndShow(id, ip string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb, ok := r.sandboxes[id]
	if !ok {
		return false
	}
	sb.IP = ip
	sb.Hidden = false
	r.changedLocked(id, false)
	return true
}

func (r *Runtime) hook() IPHook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ipHook
}

func sortSandboxes(s []Sandbox) { slices.SortFunc(s, compareSandboxes) }

// compareSandboxes orders by creation time, then ID.
func compareSandboxes(a, b Sandbox) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}
