package podip

import (
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Gauges that each network card's reconciler sets from its own pass. One
// prometheus.Gauge shared by several reconcilers would show whichever
// card's pass ended last, so each card's value is kept and the family
// reports them combined when scraped, unlabelled as before: on a node
// managing card 0 only it is card 0's value, as it always was.
//
//   - candidates, leaked, pending addresses: the sum over the cards (the
//     node's figure);
//   - runtime reachable: the minimum (1 only when every card's last call
//     to the runtime succeeded);
//   - last success timestamp: the minimum (the card whose last completed
//     pass is oldest, 0 until every card has completed one), so that a
//     staleness alert fires when any card's reconciler stalls.
//
// A card counts from its ForCard on, with 0 until its reconciler sets a
// value.
type perCardGauges struct {
	candidates, leaked, pending, reachable, lastSuccess *cardGauge
}

func newPerCardGauges() *perCardGauges {
	return &perCardGauges{
		candidates: newCardGauge("awscni_ipamd_pod_ip_reconcile_candidates",
			"Allocations whose sandbox the runtime does not list, past the grace period, awaiting confirmation", sum),
		leaked: newCardGauge("awscni_ipamd_pod_ip_reconcile_leaked",
			"Allocations currently judged leaked (confirmed absent from the runtime) and still held: report mode, or over the release cap", sum),
		pending: newCardGauge("awscni_ipamd_pod_ip_pending_addresses",
			"Addresses that joined the pool and are not assignable until checked against the runtime's sandboxes", sum),
		reachable: newCardGauge("awscni_ipamd_cri_runtime_reachable",
			"1 when the last call to the container runtime (CRI) succeeded", minimum),
		lastSuccess: newCardGauge("awscni_ipamd_pod_ip_reconcile_last_success_timestamp_seconds",
			"Unix time of the last reconciler pass that completed", minimum),
	}
}

func sum(vs []float64) float64 {
	t := 0.0
	for _, v := range vs {
		t += v
	}
	return t
}

// minimum is 0 for no values (no card yet), as an unset gauge reads.
func minimum(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	return slices.Min(vs)
}

// cardGauge is one unlabelled gauge family with a value per card,
// reported as combine of them.
type cardGauge struct {
	desc    *prometheus.Desc
	combine func([]float64) float64

	mu   sync.Mutex
	vals map[int]float64
}

func newCardGauge(name, help string, combine func([]float64) float64) *cardGauge {
	return &cardGauge{desc: prometheus.NewDesc(name, help, nil, nil), combine: combine, vals: map[int]float64{}}
}

func (g *cardGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *cardGauge) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value())
}

// value is the combined value; cards are taken in order, so a sum of the
// same values is the same float.
func (g *cardGauge) value() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	vs := make([]float64, 0, len(g.vals))
	for _, c := range slices.Sorted(maps.Keys(g.vals)) {
		vs = append(vs, g.vals[c])
	}
	return g.combine(vs)
}

// forCard is card's share, counted (as 0) from now on.
func (g *cardGauge) forCard(card int) cardGaugeView {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.vals[card]; !ok {
		g.vals[card] = 0
	}
	return cardGaugeView{g: g, card: card}
}

// cardGaugeView sets one card's value; collected, it reports the family's
// combined value (what a scrape shows).
type cardGaugeView struct {
	g    *cardGauge
	card int
}

func (v cardGaugeView) Set(x float64) {
	v.g.mu.Lock()
	defer v.g.mu.Unlock()
	v.g.vals[v.card] = x
}

func (v cardGaugeView) Describe(ch chan<- *prometheus.Desc) { v.g.Describe(ch) }
func (v cardGaugeView) Collect(ch chan<- prometheus.Metric) { v.g.Collect(ch) }
