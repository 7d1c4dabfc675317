package ipamcheck

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/cri"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
)

// twoCards is a node managing network cards 0 and 1 as ipamd serves it:
// /v1/enis with both keys, the merged /v1/reconciler. Card 0 has a live
// pod (eni-a, device 0); card 1 (eni-c, device 0 of its card) a live pod,
// a leak ipamd confirmed, and a cooling address.
func twoCards(t *testing.T, now time.Time) (nodeENIs, podip.Status) {
	t.Helper()
	enis, err := mergeCards(map[string]datastore.ENIInfos{
		"0": {ENIs: map[string]datastore.ENIView{"eni-a": eniWith("eni-a", 0, "10.0.0.5/32", &datastore.AddressView{Address: "10.0.0.5", AssignedTime: t0})}},
		"1": {ENIs: map[string]datastore.ENIView{"eni-c": eniWith("eni-c", 0, "10.0.9.0/28",
			&datastore.AddressView{Address: "10.0.9.1", AssignedTime: t0},
			&datastore.AddressView{Address: "10.0.9.2", AssignedTime: t0},
			&datastore.AddressView{Address: "10.0.9.3", AssignedTime: t0, UnassignedTime: now.Add(-10 * time.Second)})}},
	})
	require.NoError(t, err)
	merged := podip.MergeStatus([]podip.CardStatus{
		{Card: 0, Status: podip.Status{Mode: podip.Enforce, Grace: "5m0s",
			Allocations: []podip.AllocationStatus{{IP: "10.0.0.5", ENI: "eni-a", ContainerID: "web", PodNamespace: "default", PodName: "web", AssignedAt: t0}}}},
		{Card: 1, Status: podip.Status{Mode: podip.Enforce, Grace: "5m0s",
			Allocations: []podip.AllocationStatus{
				{IP: "10.0.9.1", ENI: "eni-c", ContainerID: "web", PodNamespace: "default", PodName: "web", AssignedAt: t0},
				{IP: "10.0.9.2", ENI: "eni-c", ContainerID: "job", PodNamespace: "default", PodName: "job", AssignedAt: t0}},
			Candidates: []podip.CandidateStatus{{IP: "10.0.9.2", ContainerID: "job", AssignedAt: t0, FirstSeenAbsent: t0.Add(6 * time.Minute),
				PassesAbsent: 3, Confirmed: true, AddressUse: "unused"}}}},
	})
	// As ipam-check reads /v1/reconciler: the JSON ipamd serves.
	b, err := json.Marshal(merged)
	require.NoError(t, err)
	var st podip.Status
	require.NoError(t, json.Unmarshal(b, &st))
	return enis, st
}

// /v1/enis's keys are network cards: every card's ENIs are read, each
// with its card; a key that is not a card index is an unexpected answer.
func TestEveryNetworkCardsENIsAreRead(t *testing.T) {
	enis, _ := twoCards(t, t0)
	assert.Equal(t, 2, enis.cards)
	assert.Equal(t, map[string]int{"eni-a": 0, "eni-c": 1}, enis.cardOf)
	assert.Len(t, enis.all.ENIs, 2)

	_, err := mergeCards(map[string]datastore.ENIInfos{"eth1": {}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `network card "eth1"`)
}

// A leak on card 1 is reported as a confirmed leak, naming its card; every
// address names its card, rows come in card order, and the verdicts are
// those of the same pool on one card.
func TestALeakOnCardOneIsReportedWithItsCard(t *testing.T) {
	now := t0.Add(time.Hour)
	enis, st := twoCards(t, now)
	in := Input{Now: now, Sandboxes: []cri.Sandbox{{ID: "web"}, {ID: "aws-node"}}, ENIs: enis.all, ENICards: enis.cardOf,
		Reconciler: st, Grace: grace, Cooldown: 30 * time.Second}
	res := Classify(in)

	type seen struct {
		addr    string
		card    int
		verdict Verdict
	}
	var got []seen
	for _, r := range res.Addresses {
		require.NotNil(t, r.NetworkCard, r.Address)
		got = append(got, seen{r.Address, *r.NetworkCard, r.Verdict})
	}
	assert.Equal(t, []seen{{"10.0.0.5", 0, Live}, {"10.0.9.1", 1, Live}, {"10.0.9.2", 1, LeakedCandidate}, {"10.0.9.3", 1, CoolingDown}}, got)
	assert.True(t, res.Addresses[2].Leak(), "ipamd confirmed it")
	assert.Equal(t, 1, res.Summary.ConfirmedLeaks)
	assert.Equal(t, []ENIUnassigned{{ENI: "eni-c", NetworkCard: 1, Unassigned: 13, order: place(1, 0)}}, res.UnassignedByENI)

	// The same pool on one card: the same verdicts.
	in.ENICards = nil
	for i := range in.Reconciler.Allocations {
		in.Reconciler.Allocations[i].NetworkCard = 0
	}
	one := Classify(in)
	verdicts := map[string]Verdict{}
	for _, r := range one.Addresses {
		verdicts[r.Address] = r.Verdict
	}
	for _, r := range got {
		assert.Equal(t, verdicts[r.addr], r.verdict, r.addr)
	}
	assert.Equal(t, res.Summary, one.Summary)
}

// The table shows a CARD column only when the node manages several cards;
// the JSON names every address's card (and every ENI's) always.
func TestCardColumnOnlyWithSeveralCards(t *testing.T) {
	now := t0.Add(time.Hour)
	enis, st := twoCards(t, now)
	res := Classify(Input{Now: now, Sandboxes: []cri.Sandbox{{ID: "web"}}, ENIs: enis.all, ENICards: enis.cardOf, Reconciler: st, Grace: grace})
	rep := Report{CheckedAt: now, Reconciler: ReconcilerInfo{Mode: "enforce", GracePeriod: "5m0s"}, Addresses: res.Addresses,
		UnassignedByENI: res.UnassignedByENI, Summary: res.Summary, NetworkCards: enis.cards}

	var table bytes.Buffer
	require.NoError(t, writeTable(&table, rep))
	lines := strings.Split(table.String(), "\n")
	assert.Equal(t, []string{"ADDRESS", "CARD", "ENI", "POD", "CONTAINER", "AGE", "VERDICT"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"10.0.9.2", "1", "eni-c", "default/job", "job"}, strings.Fields(lines[3])[:5])
	assert.Equal(t, []string{"(13", "addresses)", "1", "eni-c"}, strings.Fields(lines[5])[:4])
	assert.Contains(t, table.String(), "on 2 ENIs of 2 network cards")

	var js bytes.Buffer
	require.NoError(t, writeJSON(&js, rep))
	var m struct {
		NetworkCards    int `json:"networkCards"`
		Addresses       []map[string]any
		UnassignedByENI []map[string]any
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &m))
	assert.Equal(t, 2, m.NetworkCards)
	for _, a := range m.Addresses {
		assert.Contains(t, a, "networkCard", "%v", a)
	}
	assert.Equal(t, 0.0, m.Addresses[0]["networkCard"], "card 0 is named too")
	assert.Equal(t, 1.0, m.UnassignedByENI[0]["networkCard"])

	// One card: no CARD column, the JSON still names card 0.
	single := Classify(Input{Now: now, Sandboxes: []cri.Sandbox{{ID: "web"}}, Grace: grace,
		ENIs:       datastore.ENIInfos{ENIs: map[string]datastore.ENIView{"eni-a": eniWith("eni-a", 0, "10.0.0.5/32")}},
		Reconciler: podip.Status{Allocations: []podip.AllocationStatus{{IP: "10.0.0.5", ENI: "eni-a", ContainerID: "web", AssignedAt: t0}}}})
	rep = Report{Reconciler: rep.Reconciler, Addresses: single.Addresses, Summary: single.Summary, NetworkCards: 1}
	table.Reset()
	require.NoError(t, writeTable(&table, rep))
	assert.Equal(t, []string{"ADDRESS", "ENI", "POD", "CONTAINER", "AGE", "VERDICT"}, strings.Fields(strings.Split(table.String(), "\n")[0]))
	assert.NotContains(t, table.String(), "network card")
	js.Reset()
	require.NoError(t, writeJSON(&js, rep))
	assert.Contains(t, js.String(), `"networkCard": 0`)
}
