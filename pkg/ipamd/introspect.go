package ipamd

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/utils/loglimit"
)

// Introspection paths, as upstream serves them.
const (
	pathENIs            = "/v1/enis"
	pathENIConfigs      = "/v1/eni-configs"
	pathNetworkUtilsEnv = "/v1/networkutils-env-settings"
	pathIPAMDEnv        = "/v1/ipamd-env-settings"
	pathReconciler      = "/v1/reconciler"
)

type eniSource interface {
	ENIInfos() datastore.ENIInfos
}

// introspectionHandler serves upstream's read-only JSON endpoints.
type introspectionHandler struct {
	store eniSource
	cfg   Config
	// log is rate-limited: upstream logs every request, and anything on
	// the node can send them as fast as it likes.
	log *loglimit.Logger
	// eniConfigName names the node's ENIConfig (nil: no API client).
	eniConfigName func(ctx context.Context) (string, error)
	// extra lets later features add their own paths (e.g. /v1/reconciler).
	extra map[string]func() any
}

func (h *introspectionHandler) routes() map[string]func() (any, int) {
	r := map[string]func() (any, int){
		pathENIs: func() (any, int) {
			infos := h.store.ENIInfos()
			blankKeys(infos)
			// Keyed by network card index; this build manages card 0 only.
			return map[string]datastore.ENIInfos{"0": infos}, http.StatusOK
		},
		pathENIConfigs:      h.eniConfig,
		pathNetworkUtilsEnv: func() (any, int) { return h.networkUtilsEnv(), http.StatusOK },
		pathIPAMDEnv:        func() (any, int) { return h.ipamdEnv(), http.StatusOK },
	}
	for p, f := range h.extra {
		r[p] = func() (any, int) { return f(), http.StatusOK }
	}
	return r
}

func (h *introspectionHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	routes := h.routes()
	f, ok := routes[req.URL.Path]
	key := req.URL.Path // a path of ours, never the client's: keys must stay few
	if !ok {
		key = "/"
	}
	h.log.Debug(key, "introspection request", "path", req.URL.Path, "remote", req.RemoteAddr)
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
		h.log.Warn("write failed", "introspection write failed", "error", err)
	}
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

func (h *introspectionHandler) ipamdEnv() map[string]any {
	return map[string]any{
		"WARM_IP_TARGET":                     h.cfg.WarmIPTarget,
		"WARM_ENI_TARGET":                    h.cfg.WarmENITarget,
		"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": h.cfg.CustomNetworking,
		"AWS_MANAGE_ENIS_NON_SCHEDULABLE":    h.cfg.ManageENIsNonSchedulable,
		"ENABLE_SUBNET_DISCOVERY":            h.cfg.SubnetDiscovery,
	}
}

func (h *introspectionHandler) networkUtilsEnv() map[string]any {
	randomize := 2 // prng, also what unknown values mean
	switch h.cfg.Network.RandomizeSNAT {
	case "none":
		randomize = 0
	case "hashrandom":
		randomize = 1
	}
	return map[string]any{
		"AWS_VPC_K8S_CNI_CONNMARK":           h.cfg.Network.ConnmarkMark,
		"AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS": h.cfg.Network.ExcludeSNATCIDRs,
		"AWS_VPC_K8S_CNI_EXTERNALSNAT":       h.cfg.Network.ExternalSNAT,
		"AWS_EXTERNAL_SERVICE_CIDRS":         h.cfg.Network.ExternalServiceCIDRs,
		"AWS_VPC_ENI_MTU":                    h.cfg.Network.MTU,
		"AWS_VPC_K8S_CNI_VETHPREFIX":         h.cfg.Network.VethPrefix,
		"AWS_VPC_CNI_NODE_PORT_SUPPORT":      h.cfg.Network.NodePortSupport,
		"AWS_VPC_K8S_CNI_RANDOMIZESNAT":      randomize,
	}
}

// listenHTTP listens on host:port, or on a unix socket for "unix:<path>".
func listenHTTP(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		_ = os.Remove(path)
		return net.Listen("unix", path)
	}
	return net.Listen("tcp", addr)
}

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
}

// eniConfig answers /v1/eni-configs as upstream: the name of the ENIConfig
// the node's labels and annotations select, as a JSON string; 404 when the
// node cannot be read.
func (h *introspectionHandler) eniConfig() (any, int) {
	if h.eniConfigName == nil {
		return "no Kubernetes API client: the node's ENIConfig is unknown", http.StatusNotFound
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	name, err := h.eniConfigName(ctx)
	if err != nil {
		return err.Error(), http.StatusNotFound
	}
	return name, http.StatusOK
}
