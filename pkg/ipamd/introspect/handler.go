// Package introspect is ipamd's introspection endpoint: upstream's
// read-only JSON paths (/v1/enis, keyed by network card, /v1/eni-configs,
// /v1/networkutils-env-settings, /v1/ipamd-env-settings) and those the
// agent adds for its other jobs (/v1/reconciler, /v1/subnets); any other
// path lists the paths served.
//
// It only reads, and never shows what upstream hides (the container IDs
// and interface names of assigned addresses). It logs every request, as
// upstream does, but rate-limited: anything on the node can send requests
// as fast as it likes. It never imports pkg/ipamd or a job; the agent
// builds it and httpserve serves it.
package introspect

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/networkutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/loglimit"
)

// Paths, as upstream serves them (PathReconciler and PathSubnets are this
// build's).
const (
	PathENIs            = "/v1/enis"
	PathENIConfigs      = "/v1/eni-configs"
	PathNetworkUtilsEnv = "/v1/networkutils-env-settings"
	PathIPAMDEnv        = "/v1/ipamd-env-settings"
	PathReconciler      = "/v1/reconciler"
	// PathSubnets: the free addresses of the subnets the node uses, as of
	// the last DescribeSubnets answers (subnetfigures.Report).
	PathSubnets = "/v1/subnets"
)

// ENISource is the datastore's view of the node's ENIs.
type ENISource interface {
	ENIInfos() datastore.ENIInfos
}

// CardENIs is one managed network card's datastore: Index is the card's
// NetworkCardIndex (0 is the default card).
type CardENIs struct {
	Index int
	ENIs  ENISource
}

// Settings are the environment settings the two env paths report, as
// ipamd read them.
type Settings struct {
	WarmIPTarget             int  // WARM_IP_TARGET
	WarmENITarget            int  // WARM_ENI_TARGET
	CustomNetworking         bool // AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG
	ManageENIsNonSchedulable bool // AWS_MANAGE_ENIS_NON_SCHEDULABLE
	SubnetDiscovery          bool // ENABLE_SUBNET_DISCOVERY
	Network                  networkutils.Config
}

// Config is what the endpoint serves from.
type Config struct {
	// ENIs is the datastore of a node managing card 0 only; Cards, when
	// set, replaces it and lists every managed card's datastore (card 0's
	// included), each served under its index.
	ENIs     ENISource
	Cards    func() []CardENIs
	Settings Settings
	// ENIConfigName names the node's ENIConfig (nil: no API client).
	ENIConfigName func(ctx context.Context) (string, error)
	// Extra are the paths of the agent's other jobs (PathReconciler,
	// PathSubnets).
	Extra map[string]func() any
	// Log is rate-limited per path; nil: discard.
	Log *loglimit.Logger
}

// Handler serves the endpoint.
type Handler struct {
	cfg Config
}

// New returns the endpoint's handler.
func New(cfg Config) *Handler {
	if cfg.Log == nil {
		cfg.Log = loglimit.New(slog.New(slog.DiscardHandler), loglimit.Config{})
	}
	return &Handler{cfg: cfg}
}

func (h *Handler) routes() map[string]func() (any, int) {
	r := map[string]func() (any, int){
		PathENIs:            func() (any, int) { return h.enis(), http.StatusOK },
		PathENIConfigs:      h.eniConfig,
		PathNetworkUtilsEnv: func() (any, int) { return h.networkUtilsEnv(), http.StatusOK },
		PathIPAMDEnv:        func() (any, int) { return h.ipamdEnv(), http.StatusOK },
	}
	for p, f := range h.cfg.Extra {
		r[p] = func() (any, int) { return f(), http.StatusOK }
	}
	return r
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	routes := h.routes()
	f, ok := routes[req.URL.Path]
	key := req.URL.Path // a path of ours, never the client's: keys must stay few
	if !ok {
		key = "/"
	}
	h.cfg.Log.Debug(key, "introspection request", "path", req.URL.Path, "remote", req.RemoteAddr)
	var body any
	code := http.StatusOK
	if ok {
		body, code = f()
	} else {
		cmds := make([]string, 0, len(routes))
		for p := range routes {
			cmds = append(cmds, p)
		}
		body = map[string][]string{"AvailableCommands": cmds}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(body); err != nil {
		h.cfg.Log.Warn("write failed", "introspection write failed", "error", err)
	}
}

// enis answers /v1/enis as upstream: an object keyed by network card
// index as a JSON string ("0", "1", ...), each card's ENIInfos with the
// container IDs and interface names blanked.
func (h *Handler) enis() map[string]datastore.ENIInfos {
	cards := []CardENIs{{Index: 0, ENIs: h.cfg.ENIs}}
	if h.cfg.Cards != nil {
		cards = h.cfg.Cards()
	}
	out := make(map[string]datastore.ENIInfos, len(cards))
	for _, c := range cards {
		if c.ENIs == nil {
			continue
		}
		infos := c.ENIs.ENIInfos()
		blankKeys(infos)
		out[strconv.Itoa(c.Index)] = infos
	}
	return out
}

// blankKeys hides container IDs and interface names, as upstream does.
func blankKeys(infos datastore.ENIInfos) {
	for _, e := range infos.ENIs {
		for _, cidrs := range []map[string]*datastore.CidrView{e.AvailableIPv4Cidrs, e.IPv6Cidrs} {
			for _, c := range cidrs {
				for _, a := range c.IPAddresses {
					a.IPAMKey.ContainerID = ""
					a.IPAMKey.IfName = ""
				}
			}
		}
	}
}

func (h *Handler) ipamdEnv() map[string]any {
	s := h.cfg.Settings
	return map[string]any{
		"WARM_IP_TARGET":                     s.WarmIPTarget,
		"WARM_ENI_TARGET":                    s.WarmENITarget,
		"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": s.CustomNetworking,
		"AWS_MANAGE_ENIS_NON_SCHEDULABLE":    s.ManageENIsNonSchedulable,
		"ENABLE_SUBNET_DISCOVERY":            s.SubnetDiscovery,
	}
}

func (h *Handler) networkUtilsEnv() map[string]any {
	n := h.cfg.Settings.Network
	randomize := 2 // prng, also what unknown values mean
	switch n.RandomizeSNAT {
	case "none":
		randomize = 0
	case "hashrandom":
		randomize = 1
	}
	return map[string]any{
		"AWS_VPC_K8S_CNI_CONNMARK":           n.ConnmarkMark,
		"AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS": n.ExcludeSNATCIDRs,
		"AWS_VPC_K8S_CNI_EXTERNALSNAT":       n.ExternalSNAT,
		"AWS_EXTERNAL_SERVICE_CIDRS":         n.ExternalServiceCIDRs,
		"AWS_VPC_ENI_MTU":                    n.MTU,
		"AWS_VPC_K8S_CNI_VETHPREFIX":         n.VethPrefix,
		"AWS_VPC_CNI_NODE_PORT_SUPPORT":      n.NodePortSupport,
		"AWS_VPC_K8S_CNI_RANDOMIZESNAT":      randomize,
	}
}

// eniConfig answers /v1/eni-configs as upstream: the name of the ENIConfig
// the node's labels and annotations select, as a JSON string; 404 when the
// node cannot be read.
func (h *Handler) eniConfig() (any, int) {
	if h.cfg.ENIConfigName == nil {
		return "no Kubernetes API client: the node's ENIConfig is unknown", http.StatusNotFound
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	name, err := h.cfg.ENIConfigName(ctx)
	if err != nil {
		return err.Error(), http.StatusNotFound
	}
	return name, http.StatusOK
}
