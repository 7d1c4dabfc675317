package rpcserver

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/addfail"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/loglimit"
)

// Options are what the handlers serve from, in three groups: the
// collaborators they call, the settings that shape requests and replies,
// and where they report. The groups are embedded (o.Version reads the
// setting); a literal names each group.
type Options struct {
	Deps
	Settings
	Observability
}

// Deps are the collaborators the handlers call. A nil func or annotator
// means the feature is absent: no pool manager to wake, no reconciler to
// reclaim or collect garbage through, no pod annotations.
type Deps struct {
	// Store assigns and releases pod addresses (the node's per-card
	// datastores, *cards.Set).
	Store Allocator
	// Stats counts the pool for STATUS and explains failed ADDs from its
	// figures (*cards.Set).
	Stats PoolCounter
	// Pods, when set, records each pod's address on the pod
	// (ANNOTATE_POD_IP). Its calls must not block.
	Pods PodAnnotator
	// OnExhausted is told when an ADD finds no address (it wakes the pool
	// manager, which merges wake-ups).
	OnExhausted func()
	// Reclaim frees one confirmed leaked address for an ADD that found
	// none (the pod-IP reconciler).
	Reclaim func(ctx context.Context) bool
	// GC releases allocations of network whose attachment is not in valid
	// (the reconciler's safe path); nil: GC releases nothing.
	GC func(ctx context.Context, network string, valid map[[2]string]bool) (released, deferred int)
	// Explain says why an ADD found no address, from what ipamd knows
	// now (nil: only the pool's own figures are unknown and the line is
	// generic).
	Explain func() addfail.Cause
	// ExplainCard, when set, says why network card card (> 0) had no
	// address for a multi-NIC pod (nil: a line from the card's own
	// figures). The cause names the card either way.
	ExplainCard func(card int) addfail.Cause
	// Warn, when set, posts the cause of a failed ADD on the pod (a
	// rate-limited Warning event). Its calls must not block.
	Warn PodWarner
	// PodSource, when set, turns security groups for pods on
	// (ENABLE_POD_ENI): every ADD looks its pod up first, and a pod that
	// asks for a branch ENI is answered from its annotation without the
	// datastore; a DEL the datastore does not know looks the pod up too.
	PodSource PodSource
	// TrunkLink returns the trunk ENI's link index, the parent of a
	// branch pod's VLAN link (an error while the node has no trunk).
	// Called only for branch pods.
	TrunkLink func() (int, error)
}

// PodSource reads this node's pods (k8sapi.PodCache). A pod that does not
// exist is an error satisfying apierrors.IsNotFound. Pods returned are
// shared and never changed.
type PodSource interface {
	// Get reads from the cache, or directly on a miss.
	Get(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// Fresh reads directly from the API server.
	Fresh(ctx context.Context, namespace, name string) (*corev1.Pod, error)
}

// PodWarner tells a pod why its ADD failed (k8sapi.PodWarnings).
type PodWarner interface {
	AddFailed(namespace, name, reason, line string)
}

// Allocator is the part of the node's datastores (one per managed network
// card, card 0 first) the CNI handlers need.
type Allocator interface {
	// Assign gives a single-IP pod its address: card 0's, or the next
	// card's when a card has none free.
	Assign(datastore.IPAMKey, datastore.IPAMMetadata) (datastore.Allocation, error)
	// AssignEach gives a multi-NIC pod one address per card, in card
	// order, or none (the error then names the card that failed).
	AssignEach(datastore.IPAMKey, datastore.IPAMMetadata) ([]datastore.Allocation, error)
	// Release frees the key on every card that holds it and returns the
	// addresses in card order, with any card's failure;
	// datastore.ErrUnknownPod when no card held it.
	Release(datastore.IPAMKey) ([]datastore.Allocation, error)
}

// PoolCounter is the part of the datastores STATUS and the explanation
// of a failed ADD need.
type PoolCounter interface {
	// Stats are the figures of all cards together.
	Stats() datastore.Stats
	// CardStats are one card's figures (false: not a managed card).
	CardStats(card int) (datastore.Stats, bool)
}

// PodAnnotator records a pod's address on the pod object (upstream's
// ANNOTATE_POD_IP). Both calls return at once: the API server is reached
// in the background, so an ADD or DEL never waits on it or fails by it.
type PodAnnotator interface {
	// Assigned sets the pod's address after a successful ADD.
	Assigned(namespace, name, ip string)
	// Released clears it after a DEL, if it still names ip.
	Released(namespace, name, ip string)
}

// Settings shape requests and replies (upstream's names).
type Settings struct {
	// Version is the ClientVersion requests must carry.
	Version           string
	NetworkPolicyMode string
	// EnableMultiNIC (ENABLE_MULTI_NIC): an ADD that asks for a multi-NIC
	// attachment gets one address per managed card; off, such an ADD is
	// refused (Success=false), as upstream.
	EnableMultiNIC   bool
	ExternalSNAT     bool
	ExcludeSNATCIDRs []string
	// VPCCIDRs returns the VPC IPv4 CIDRs for ADD replies.
	VPCCIDRs func() []string
	// IPv6 (ENABLE_IPv6): ADD replies carry VPCv6CIDRs instead of the IPv4
	// CIDRs and external-SNAT flag.
	IPv6       bool
	VPCv6CIDRs func() []string
	// The instance as the network-policy agent is told about it
	// (GetNetworkPolicyConfigs); empty without EC2 (a development pool).
	InstanceID, Region, NodeIPv4, NodeIPv6 string
}

// Observability is where the handlers report beyond their own request
// metrics.
type Observability struct {
	// Errors is upstream's awscni_ipamd_error_count, shared with the rest
	// of ipamd.
	Errors *prometheus.CounterVec
	// Log is the handlers' log (nil: nothing is logged).
	Log *slog.Logger
	// LogLimit bounds the warnings malformed requests log (zero: the
	// loglimit defaults, 10 lines per RPC and reason a minute).
	LogLimit loglimit.Config
}

// reporter is what the handlers report through, built once by New.
type reporter struct {
	errors   *prometheus.CounterVec
	log      *slog.Logger
	metrics  *Metrics
	warnings *loglimit.Logger // malformed requests' warnings, rate-limited
}

func newReporter(o Observability, m *Metrics) reporter {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return reporter{errors: o.Errors, log: log, metrics: m, warnings: loglimit.New(log, o.LogLimit)}
}
