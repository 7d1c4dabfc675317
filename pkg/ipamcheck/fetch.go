package ipamcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/subnetfigures"
)

// Introspection paths ipamd serves (pkg/ipamd/introspect).
const (
	pathENIs       = "/v1/enis"
	pathReconciler = "/v1/reconciler"
	pathSubnets    = "/v1/subnets"
)

// ErrReconcilerOff means ipamd serves no /v1/reconciler: its pod-IP
// reconciler is off, so there is nothing to compare with.
var ErrReconcilerOff = errors.New("ipamd serves no /v1/reconciler: its pod-IP reconciler is off (POD_IP_RECONCILE_MODE=off); set POD_IP_RECONCILE_MODE=report to check without freeing anything")

// introspection reads ipamd's introspection endpoint, on host:port or, as
// INTROSPECTION_BIND_ADDRESS allows, on "unix:<path>". GET only.
type introspection struct {
	base   string
	client *http.Client
}

func newIntrospection(addr string, timeout time.Duration) *introspection {
	tr := &http.Transport{DisableKeepAlives: true}
	base := "http://" + addr
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		base = "http://ipamd"
	}
	return &introspection{base: base, client: &http.Client{Transport: tr, Timeout: timeout}}
}

// nodeENIs is /v1/enis: every managed network card's ENIs together, each
// ENI's card, and how many cards ipamd served.
type nodeENIs struct {
	all    datastore.ENIInfos
	cardOf map[string]int // ENI ID -> network card
	cards  int
}

// enis reads /v1/enis, keyed by network card index ("0", "1", ...): one
// datastore per managed card. An ENI belongs to one card, so the cards'
// ENIs are merged without collisions.
func (c *introspection) enis(ctx context.Context) (nodeENIs, error) {
	var cards map[string]datastore.ENIInfos
	if err := c.get(ctx, pathENIs, &cards); err != nil {
		return nodeENIs{}, err
	}
	return mergeCards(cards)
}

// mergeCards merges /v1/enis's cards.
func mergeCards(cards map[string]datastore.ENIInfos) (nodeENIs, error) {
	out := nodeENIs{all: datastore.ENIInfos{ENIs: map[string]datastore.ENIView{}}, cardOf: map[string]int{}, cards: len(cards)}
	for key, card := range cards {
		index, err := strconv.Atoi(key)
		if err != nil || index < 0 {
			return nodeENIs{}, fmt.Errorf("GET %s: unexpected answer: network card %q is not an index", pathENIs, key)
		}
		out.all.TotalIPs += card.TotalIPs
		out.all.AssignedIPs += card.AssignedIPs
		for id, e := range card.ENIs {
			out.all.ENIs[id] = e
			out.cardOf[id] = index
		}
	}
	return out, nil
}

// reconciler reads /v1/reconciler: every card's reconciler merged
// (podip.NodeStatus), each allocation naming its card. Its candidates are
// read without theirs: one is matched to its allocation by sandbox and
// address, which no two cards share. ipamd answers a path it does not serve
// with its list of paths, so a body without a mode means the reconciler
// is off.
func (c *introspection) reconciler(ctx context.Context) (podip.Status, error) {
	var st podip.Status
	if err := c.get(ctx, pathReconciler, &st); err != nil {
		return st, err
	}
	if st.Mode == "" {
		return st, ErrReconcilerOff
	}
	return st, nil
}

// subnets reads /v1/subnets; served is false when ipamd answers with its
// list of paths instead (a build without it, or one without EC2).
func (c *introspection) subnets(ctx context.Context) (subnets []subnetfigures.SubnetFree, served bool, err error) {
	var r struct {
		Subnets *[]subnetfigures.SubnetFree `json:"subnets"`
	}
	if err := c.get(ctx, pathSubnets, &r); err != nil {
		return nil, false, err
	}
	if r.Subnets == nil {
		return nil, false, nil
	}
	return *r.Subnets, true, nil
}

func (c *introspection) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: unexpected answer: %w", path, err)
	}
	return nil
}
