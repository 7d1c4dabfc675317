package ipamd

import (
	"context"
	"fmt"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/cards"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/introspect"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/nodeinit"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/podip"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/poolgauges"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/restore"
)

// cardState is one managed network card above 0 (ENABLE_MULTI_NIC): its
// datastore and checkpoint, what its start found, and its own pool manager
// and pod-IP reconciler. Card 0 is the agent's store, pool and recon.
type cardState struct {
	index int
	store *datastore.DataStore
	node  nodeinit.Card
	pool  *pool.Manager
	recon *podip.Reconciler
}

// startCards starts the managed cards above 0 after card 0's node init:
// which cards are managed, their ENIs in their own datastores, an ENI
// attached on an empty one (nodeinit.Cards). Without ENABLE_MULTI_NIC it
// does nothing.
func (st *startState) startCards(ctx context.Context, nc nodeinit.Config) error {
	a := st.a
	if !a.opts.Config.EnableMultiNIC || a.opts.DevPool != nil {
		return nil
	}
	stores := map[int]*datastore.DataStore{}
	var cpErr error
	storeFor := func(card int) nodeinit.Store {
		if s, ok := stores[card]; ok {
			return s
		}
		s, err := a.newCardStore(card, st)
		if err != nil && cpErr == nil {
			cpErr = err
		}
		stores[card] = s
		return s
	}
	started, err := nodeinit.Cards(ctx, nc, true, nodeinit.CardDeps{AWS: a.aws, Store: storeFor, SetupENI: a.setupENI}, st.limits)
	for _, c := range started {
		a.cards = append(a.cards, &cardState{index: c.Index, store: stores[c.Index], node: c})
		delete(stores, c.Index)
	}
	for _, s := range stores {
		_ = s.Close() // a card whose start failed: its store never serves
	}
	if err == nil {
		err = cpErr
	}
	if err != nil {
		return err
	}
	a.log.Info("multi-NIC: managed network cards", "cards", a.cardIndexes())
	a.trackENISubnets() // the subnet figures name the cards' ENIs too
	return nil
}

// everyCardsENIs lists every managed card's ENIs, card 0's first: what
// the security-group refresh gives the primary ENI's groups to (upstream:
// every ENI of every datastore) and what the subnet figures count.
type everyCardsENIs struct{ a *Agent }

func (v everyCardsENIs) ENISummaries() []datastore.ENISummary {
	return v.snapshot().ENISummaries()
}

// snapshot is the list of stores as it is now (the cards above 0 are
// fixed once start-up has started them).
func (v everyCardsENIs) snapshot() cardStores {
	out := cardStores{v.a.store}
	for _, c := range v.a.cards {
		out = append(out, c.store)
	}
	return out
}

// cardStores are some cards' stores, listed together.
type cardStores []*datastore.DataStore

func (s cardStores) ENISummaries() []datastore.ENISummary {
	var out []datastore.ENISummary
	for _, st := range s {
		if st != nil {
			out = append(out, st.ENISummaries()...)
		}
	}
	return out
}

// newCardStore is the datastore of network card card, checkpointed beside
// card 0's (ipam-nic-<card>.json), with card 0's settings but never
// prefix delegation (cards above 0 hold secondary IPs, as upstream).
// A checkpoint that cannot be opened fails the start, as card 0's does;
// the store is still returned (in memory) so node init can go on to
// report the first error.
func (a *Agent) newCardStore(card int, st *startState) (*datastore.DataStore, error) {
	cfg := a.opts.Config
	path := datastore.CheckpointPathForCard(cfg.CheckpointPath, card)
	dc := datastore.Config{
		NetworkCard:        card,
		IPv6:               cfg.EnableIPv6,
		Cooldown:           cfg.IPCooldown,
		Logger:             a.log.With("networkCard", card),
		VerifyNewAddresses: st.verifying,
	}
	fcp, err := datastore.NewFileCheckpointer(path)
	if err != nil {
		return datastore.New(dc), fmt.Errorf("network card %d checkpoint %s: %w", card, path, err)
	}
	dc.Checkpointer = timedCheckpointer{fcp, a.metrics}
	return datastore.New(dc), nil
}

// cardIndexes are the managed cards, card 0 first.
func (a *Agent) cardIndexes() []int {
	out := []int{0}
	for _, c := range a.cards {
		out = append(out, c.index)
	}
	return out
}

// cardSet is every managed card's store, card 0 first: what ADD, DEL and
// the DEL queue serve from.
func (a *Agent) cardSet() *cards.Set {
	list := []cards.Card{{Index: 0, Store: a.store}}
	for _, c := range a.cards {
		list = append(list, cards.Card{Index: c.index, Store: c.store})
	}
	s, err := cards.New(list...)
	if err != nil {
		// The list is built above from distinct, ordered cards.
		panic(fmt.Sprintf("ipamd: managed cards %v: %v", a.cardIndexes(), err))
	}
	return s
}

// connectCardRuntimes gives each card above 0 its own pod-IP reconciler on
// the same runtime (their gauges are combined per card, their counters
// shared).
func (a *Agent) connectCardRuntimes(src podip.SandboxSource, verifying bool) {
	if src == nil {
		return
	}
	rc := a.opts.Config.Reconciler
	rc.PodName = a.opts.Config.PodName
	rc.Interfaces = recordedInterfaces(a.store)
	for _, c := range a.cards {
		rc.NetworkCard = c.index // the runtime's IPs do not cover this card
		c.recon = podip.New(rc, src, c.store, a.events, a.log.With("networkCard", c.index), a.metrics.podip.ForCard(c.index))
		c.recon.SetNodeRules(a.podRules())
		if !verifying {
			store := c.store
			c.recon.OnFirstList(func() { store.SetVerifyNewAddresses(true) })
		}
	}
}

// recordedInterfaces is what card 0's store records of a sandbox, for the
// reconcilers of the cards above it (podip.Config.Interfaces): whether an
// allocation holds it, and the most interfaces one names. It walks the
// allocations, so it is for the reconcilers' rare questions (a multi-NIC
// pod holding nothing on a card), never for an ADD.
func recordedInterfaces(store *datastore.DataStore) func(sandboxID string) (held bool, count int) {
	return func(sandboxID string) (held bool, count int) {
		for _, a := range store.Allocations() {
			if a.Key.ContainerID == sandboxID {
				held, count = true, max(count, a.Metadata.InterfacesCount)
			}
		}
		return held, count
	}
}

// buildCardPools makes each card's pool manager: the card's own ENI limit
// and addresses per ENI, upstream's fixed targets for cards above 0
// (pool.Config.NetworkCard), wired to the card's reconciler.
func (a *Agent) buildCardPools() {
	if a.poolCfg == nil {
		return
	}
	for _, c := range a.cards {
		deps := a.poolDeps(c.store, c.recon)
		// The pool's own gauges (ENI and address limits, at max pods, leak
		// suspected) are card 0's, as upstream's; the cards' counts are in
		// the pool gauges (poolgauges) and awscni_ipamd_error_count.
		deps.Placement, deps.AskForTrunk, deps.Metrics = nil, nil, nil
		c.pool = pool.New(c.node.PoolConfig(*a.poolCfg), deps)
	}
}

// restoreCards restores each card's checkpoint and decides how its other
// addresses are checked, as for card 0.
func (a *Agent) restoreCards(ctx context.Context) error {
	cfg := a.opts.Config
	for _, c := range a.cards {
		rc := restore.Config{Checkpoint: datastore.CheckpointPathForCard(cfg.CheckpointPath, c.index), Mode: cfg.Reconciler.Mode,
			Log: a.log.With("networkCard", c.index), Node: restore.Node{IPv6: cfg.EnableIPv6, LeftOut: c.node.LeftOut}}
		if c.node.Attached != "" {
			rc.Node.AttachedNow = []string{c.node.Attached}
		}
		if c.recon != nil {
			rc.Reconciler = c.recon
		}
		if err := restore.Run(ctx, rc, c.store); err != nil {
			return fmt.Errorf("network card %d: %w", c.index, err)
		}
	}
	return nil
}

// sizeCards sizes each card's pool once, as afterRestore does card 0's.
func (a *Agent) sizeCards(ctx context.Context) {
	for _, c := range a.cards {
		if c.pool == nil || !c.pool.Config().Provisioning {
			continue
		}
		if c.store.Stats().AssignableIPs() > 0 {
			c.pool.StepFirstOnRun()
			continue
		}
		c.pool.Step(ctx)
	}
}

// cardJobs are the cards' pool managers and reconcilers.
func (a *Agent) cardJobs() []job {
	var out []job
	for _, c := range a.cards {
		if c.pool != nil {
			out = append(out, c.pool)
		}
		if c.recon != nil {
			out = append(out, c.recon)
		}
	}
	return out
}

// wakePools wakes every card's pool manager (an ADD found no address).
func (a *Agent) wakePools() {
	if a.pool != nil {
		a.pool.Wake()
	}
	for _, c := range a.cards {
		if c.pool != nil {
			c.pool.Wake()
		}
	}
}

// reconcilers are the reconcilers of every card that has one, card 0 first.
func (a *Agent) reconcilers() []*podip.Reconciler {
	var out []*podip.Reconciler
	if a.recon != nil {
		out = append(out, a.recon)
	}
	for _, c := range a.cards {
		if c.recon != nil {
			out = append(out, c.recon)
		}
	}
	return out
}

// reclaimForAdd frees confirmed leaked addresses for an ADD that found
// none: each card's reconciler is asked (a multi-NIC pod needs one on
// every card), and it reports whether any was freed.
func (a *Agent) reclaimForAdd(ctx context.Context) bool {
	any := false
	for _, r := range a.reconcilers() {
		if r.ReclaimForAdd(ctx) {
			any = true
		}
	}
	return any
}

// collectGarbage is CNI GC over every card: each card's reconciler
// releases the allocations of network whose attachment is not valid.
func (a *Agent) collectGarbage(ctx context.Context, network string, valid map[[2]string]bool) (released, deferred int) {
	for _, r := range a.reconcilers() {
		rel, def := r.CollectGarbage(ctx, network, valid)
		released, deferred = released+rel, deferred+def
	}
	return released, deferred
}

// cardENIs are every card's ENIs for /v1/enis.
func (a *Agent) cardENIs() []introspect.CardENIs {
	out := []introspect.CardENIs{{Index: 0, ENIs: a.store}}
	for _, c := range a.cards {
		out = append(out, introspect.CardENIs{Index: c.index, ENIs: c.store})
	}
	return out
}

// cardGaugeSources are every card's stores for the pool gauges (none
// before the datastore exists).
func (a *Agent) cardGaugeSources() []poolgauges.CardSource {
	if a.store == nil {
		return nil
	}
	out := []poolgauges.CardSource{{Index: 0, Source: a.store}}
	for _, c := range a.cards {
		out = append(out, poolgauges.CardSource{Index: c.index, Source: c.store})
	}
	return out
}

// reconcilerIntrospection is /v1/reconciler: every card's reconciler
// merged (card 0 alone: its own view, NetworkCard fields left out).
func (a *Agent) reconcilerIntrospection() any {
	list := []podip.CardStatus{{Card: 0, Status: a.recon.Introspect()}}
	for _, c := range a.cards {
		if c.recon != nil {
			list = append(list, podip.CardStatus{Card: c.index, Status: c.recon.Introspect()})
		}
	}
	return podip.MergeStatus(list)
}

// closeCardStores flushes every card's checkpoint (card 0's is closed by
// the caller).
func (a *Agent) closeCardStores() error {
	var first error
	for _, c := range a.cards {
		if c.store == nil {
			continue
		}
		if err := c.store.Close(); err != nil && first == nil {
			first = fmt.Errorf("network card %d: %w", c.index, err)
		}
	}
	return first
}
