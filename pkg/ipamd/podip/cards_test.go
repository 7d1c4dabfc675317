package podip

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// cardOne is a second network card's datastore and reconciler, on the
// fixture's runtime and clock, reporting to m.
type cardOne struct {
	store *datastore.DataStore
	r     *Reconciler
}

func (f *reconFixture) addCardOne(t *testing.T, m *Metrics, mutate ...func(*Config)) *cardOne {
	t.Helper()
	store := datastore.New(datastore.Config{Now: f.clk.Now, Cooldown: 30 * time.Second})
	t.Cleanup(func() { store.Close() })
	const eni = "eni-card1000000001"
	require.NoError(t, store.AddENI(datastore.ENIInfo{ID: eni, DeviceNumber: 0, Subnet: netip.MustParsePrefix("10.251.0.0/16"),
		RouteTableID: 10100, SubnetID: "subnet-dev"}))
	for i := range 4 {
		require.NoError(t, store.AddCIDR(eni, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 251, 0, byte(i + 1)}), 32)))
	}
	cfg := Config{}
	for _, mu := range mutate {
		mu(&cfg)
	}
	r := New(cfg, f.r.view.src, store, nil, nil, m)
	r.now = f.clk.Now
	return &cardOne{store: store, r: r}
}

// pod starts a pod on card 1: an allocation there and, unless gone, a
// READY sandbox on the shared runtime.
func (c *cardOne) pod(t *testing.T, f *reconFixture, name string, gone bool) datastore.Allocation {
	t.Helper()
	id := fmt.Sprintf("%064s", "c1"+name)
	a, err := c.store.Assign(datastore.IPAMKey{NetworkName: "aws-cni", ContainerID: id, IfName: "eth0"},
		datastore.IPAMMetadata{K8SPodNamespace: "default", K8SPodName: name})
	require.NoError(t, err)
	if !gone {
		f.rt.Add(fakecri.Sandbox{ID: id, Name: name, Namespace: "default", State: runtimeapi.PodSandboxState_SANDBOX_READY,
			CreatedAt: f.clk.Now(), IP: a.IP.String()})
	}
	return a
}

// Two cards' reconcilers sharing one Metrics: counters add up, and the
// per-pass gauges are the node's (candidates summed over the cards), not
// the card whose pass ended last; the families keep their names and
// (no) labels.
func TestReconcilersOfSeveralCardsReportTheNodesGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	report := func(c *Config) { c.Mode = Report }
	f := newReconFixture(t, report)
	f.r = New(Config{Mode: Report}, f.r.view.src, f.store, nil, nil, m)
	f.r.now = f.clk.Now
	c1 := f.addCardOne(t, m.ForCard(1), report)
	f.pod(t, "web", false)
	f.pod(t, "job", true)
	c1.pod(t, f, "web1", false)
	c1.pod(t, f, "job1", true)
	c1.pod(t, f, "cron1", true)
	f.clk.Advance(6 * time.Minute)
	f.pass(t)
	c1.r.Pass(t.Context(), false)
	require.Len(t, f.r.Status().Candidates, 1)
	require.Len(t, c1.r.Status().Candidates, 2)

	fams, err := reg.Gather()
	require.NoError(t, err)
	byName := map[string]*dto.MetricFamily{}
	for _, fam := range fams {
		byName[fam.GetName()] = fam
	}
	gauge := func(name string) float64 {
		t.Helper()
		fam := byName[name]
		require.NotNil(t, fam, name)
		assert.Equal(t, dto.MetricType_GAUGE, fam.GetType(), name)
		require.Len(t, fam.GetMetric(), 1, name)
		assert.Empty(t, fam.GetMetric()[0].GetLabel(), name)
		return fam.GetMetric()[0].GetGauge().GetValue()
	}
	assert.Equal(t, 3.0, gauge("awscni_ipamd_pod_ip_reconcile_candidates"), "1 on card 0 + 2 on card 1")
	assert.Equal(t, float64(f.r.Status().Leaked+c1.r.Status().Leaked), gauge("awscni_ipamd_pod_ip_reconcile_leaked"))
	assert.Equal(t, 1.0, gauge("awscni_ipamd_cri_runtime_reachable"))
	assert.Equal(t, float64(f.clk.Now().Unix()), gauge("awscni_ipamd_pod_ip_reconcile_last_success_timestamp_seconds"))
	assert.Equal(t, 0.0, gauge("awscni_ipamd_pod_ip_pending_addresses"))
	assert.Equal(t, uint64(2), byName["awscni_ipamd_pod_ip_reconcile_pass_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(),
		"one pass per card, one histogram")
}

// The per-pass gauges combine the cards' values: counts are summed; the
// runtime is reachable and the last success is as recent as the card
// furthest behind (0 until every card has had one). A card counts from
// ForCard on; a node of card 0 only reports card 0's values.
func TestPerCardGaugesCombine(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.reconcileCandidates.Set(2)
	m.runtimeReachable.Set(1)
	m.reconcileLastSuccess.Set(100)
	assert.Equal(t, 2.0, testutil.ToFloat64(m.reconcileCandidates), "card 0 alone")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.runtimeReachable))
	assert.Equal(t, 100.0, testutil.ToFloat64(m.reconcileLastSuccess))

	c1 := m.ForCard(1)
	assert.Equal(t, 0.0, testutil.ToFloat64(m.runtimeReachable), "card 1 has not reached the runtime yet")
	assert.Equal(t, 0.0, testutil.ToFloat64(m.reconcileLastSuccess), "card 1 has not completed a pass yet")
	c1.reconcileCandidates.Set(3)
	c1.runtimeReachable.Set(1)
	c1.reconcileLastSuccess.Set(90)
	assert.Equal(t, 5.0, testutil.ToFloat64(m.reconcileCandidates))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.runtimeReachable))
	assert.Equal(t, 90.0, testutil.ToFloat64(m.reconcileLastSuccess))
	c1.runtimeReachable.Set(0)
	assert.Equal(t, 0.0, testutil.ToFloat64(m.runtimeReachable))

	// Setting a card again replaces its value; ForCard again is the same card.
	m.ForCard(1).reconcileCandidates.Set(1)
	assert.Equal(t, 3.0, testutil.ToFloat64(c1.reconcileCandidates))

	// Counters and the agent-wide gauges are shared.
	c1.reconcileReclaimed.Inc()
	c1.MarkRunning(true)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.reconcileReclaimed))
	assert.Equal(t, 1.0, testutil.ToFloat64(m.reconcilerRunning))
}
