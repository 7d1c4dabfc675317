package nodeinit

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/awsutils"
	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/pool"
)

// CardAWS is node init's AWS with what a card above 0 needs at start: an
// ENI attached on a managed card that has none.
type CardAWS interface {
	AWS
	AllocENI(ctx context.Context, o awsutils.AllocOptions) (awsutils.ENI, error)
	WaitAttached(ctx context.Context, eniID string) (awsutils.ENI, error)
}

var _ CardAWS = (*awsutils.Client)(nil)

// CardDeps are what the start of the cards above 0 reads and fills: one
// datastore per managed card.
type CardDeps struct {
	AWS CardAWS
	// Store is the datastore of a managed card above 0.
	Store func(card int) Store
	// SetupENI prepares the host side of an ENI before its addresses join.
	SetupENI func(ctx context.Context, e awsutils.ENI) error
}

// Card is what the start of one managed card above 0 found: the figures
// its pool manager is built with (pool.Config{NetworkCard: Index,
// MaxENIs, UnmanagedENIs, SlotsPerENI}).
type Card struct {
	Index         int
	MaxENIs       int // the card's MaximumNetworkInterfaces
	UnmanagedENIs int // ENIs attached on the card ipamd leaves alone
	SlotsPerENI   int // secondary IPs an ENI holds (never prefixes on these cards)
	MaxAddresses  int // addresses the card's ENIs can hold in all
	// Attached is the ENI attached at start because the card had no
	// managed ENI ("" when none was).
	Attached string
	// LeftOut are managed ENIs whose setup failed: the card's ENI sync adds
	// them later.
	LeftOut []string
}

// Cards starts the managed network cards above 0 (ENABLE_MULTI_NIC): it
// decides which cards are managed (ManagedCards) from one list of the
// instance's ENIs, then, card by card, adds each card's managed ENIs
// (tagged as ipamd's when provisioning, set up on the host) to that card's
// datastore, and, when provisioning and a card has no managed ENI,
// attaches one there with one address (upstream: one ENI per empty managed
// card at start). EFA-only ENIs never join; EFA ENIs join (never freed).
// With multi-NIC off it does nothing and returns nil. Card 0 is IPv4's.
// A failed attach is logged and counted: the card's pool manager attaches
// one at its first step.
func Cards(ctx context.Context, cfg Config, multiNIC bool, deps CardDeps, limits Limits) ([]Card, error) {
	if !multiNIC {
		return nil, nil
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	aws := deps.AWS
	id := aws.InstanceIdentity()
	enis, err := retryThrottled(ctx, cfg.Log, "DescribeNetworkInterfaces", aws.InstanceENIs)
	if err != nil {
		return nil, fmt.Errorf("list the instance's ENIs: %w", err)
	}
	var out []Card
	for _, card := range ManagedCards(true, len(limits.CardENIs), enis, id, cfg.Rules) {
		if card == 0 {
			continue
		}
		c, err := startCard(ctx, cfg, deps, limits, enis, card)
		if err != nil {
			return out, fmt.Errorf("network card %d: %w", card, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// cardMaxENIs is a card's ENI limit: the card's own, capped by MAX_ENI
// when that is set (1 or more), which upstream applies to every card.
func cardMaxENIs(card, maxENI int) int {
	if maxENI >= 1 && maxENI < card {
		return maxENI
	}
	return card
}

// startCard fills one card's datastore (see Cards).
func startCard(ctx context.Context, cfg Config, deps CardDeps, limits Limits, enis []awsutils.ENI, card int) (Card, error) {
	aws, store := deps.AWS, deps.Store(card)
	id := aws.InstanceIdentity()
	c := Card{Index: card, MaxENIs: cardMaxENIs(limits.CardENIs[card], cfg.MaxENI), SlotsPerENI: max(limits.IPv4PerENI-1, 0),
		UnmanagedENIs: pool.CountUnmanagedOnCard(enis, id, cfg.Rules, card)}
	managed := 0
	for _, e := range enis {
		if !e.Attached || e.NetworkCard != card || !pool.IsManaged(e, id, cfg.Rules) {
			continue
		}
		managed++
		if cfg.Provisioning && !pool.IsTrunk(e) {
			_, err := retryThrottled(ctx, cfg.Log, "CreateTags", func(ctx context.Context) (struct{}, error) {
				return struct{}{}, aws.EnsureENITags(ctx, e)
			})
			if err != nil {
				return c, fmt.Errorf("tag ENI %s: %w", e.ID, err)
			}
		}
		if err := c.join(ctx, cfg, deps, store, e); err != nil {
			return c, err
		}
	}
	if managed == 0 && cfg.Provisioning {
		if err := c.attachOne(ctx, cfg, deps, store); err != nil {
			cfg.Errors.WithLabelValues("increaseIPPoolAllocENI").Inc()
			cfg.Log.Error("could not attach an ENI on an empty network card; its pool manager tries again", "card", card, "error", err)
		}
	}
	c.MaxAddresses = pool.MaxAddresses(pool.PodENIs(c.MaxENIs, c.UnmanagedENIs, false, false), c.SlotsPerENI, false)
	cfg.Log.Info("network card initialised", "card", card, "enis", len(store.ENISummaries()), "attached", c.Attached,
		"maxENIs", c.MaxENIs, "unmanagedENIs", c.UnmanagedENIs, "slotsPerENI", c.SlotsPerENI)
	return c, nil
}

// join sets an ENI up on the host and adds it with its addresses; one
// whose setup fails is left out for the ENI sync.
func (c *Card) join(ctx context.Context, cfg Config, deps CardDeps, store Store, e awsutils.ENI) error {
	if err := deps.SetupENI(ctx, e); err != nil {
		cfg.Errors.WithLabelValues("waitENIAttachedMaxRetryExceeded").Inc()
		cfg.Log.Error("could not set up ENI; leaving it out for now", "eni", e.ID, "card", c.Index, "error", err)
		c.LeftOut = append(c.LeftOut, e.ID)
		return nil
	}
	if err := pool.AddENI(store, e); err != nil {
		return fmt.Errorf("add ENI %s: %w", e.ID, err)
	}
	return nil
}

// attachOne attaches an ENI with one address on the card (in the primary
// ENI's subnet) and joins it.
func (c *Card) attachOne(ctx context.Context, cfg Config, deps CardDeps, store Store) error {
	e, err := deps.AWS.AllocENI(ctx, awsutils.AllocOptions{IPs: 1, NetworkCard: c.Index})
	if err != nil {
		return err
	}
	c.Attached = e.ID
	attached, err := deps.AWS.WaitAttached(ctx, e.ID)
	if err != nil {
		cfg.Log.Error("ENI attached at start did not come up; the card's ENI sync adds it if it does", "eni", e.ID, "card", c.Index, "error", err)
		c.LeftOut = append(c.LeftOut, e.ID)
		return nil
	}
	return c.join(ctx, cfg, deps, store, attached)
}

// PoolConfig is the pool manager's Config for this card, from card 0's
// (base): the card, its ENI limit, unmanaged ENIs and slots; pool.New
// applies the rest of a card above 0's rules (targets, no prefixes, no
// trunk, no custom networking or subnet discovery).
func (c Card) PoolConfig(base pool.Config) pool.Config {
	cfg := base
	cfg.NetworkCard, cfg.MaxENIs, cfg.UnmanagedENIs, cfg.SlotsPerENI = c.Index, c.MaxENIs, c.UnmanagedENIs, c.SlotsPerENI
	cfg.Targets.SlotsPerENI, cfg.Targets.MaxAddresses = c.SlotsPerENI, c.MaxAddresses
	return cfg
}
