package warmpool

// Network cards above 0 (ENABLE_MULTI_NIC) keep a small pool of their own,
// as upstream: one warm address and at least one address, secondary IPs
// only (no prefixes, whatever ENABLE_PREFIX_DELEGATION says), and none of
// WARM_ENI_TARGET or WARM_PREFIX_TARGET.
const (
	CardWarmIPTarget    = 1
	CardMinimumIPTarget = 1
)

// CardTargets is the Config of network card card's pool, from the node's
// base Config. Card 0 (or below) keeps base unchanged. A card above 0 gets
// WarmIPTarget = MinimumIPTarget = 1, no WARM_ENI or WARM_PREFIX target,
// no prefix delegation, and MaxAddresses unknown (0): base's counts card
// 0's ENIs, so the caller sets the card's own. MaxPods and SlotsPerENI
// (secondary IPs per ENI: the same figure as prefixes per ENI) carry over.
func CardTargets(base Config, card int) Config {
	if card <= 0 {
		return base
	}
	return Config{
		WarmIPTarget:    CardWarmIPTarget,
		MinimumIPTarget: CardMinimumIPTarget,
		MaxPods:         base.MaxPods,
		SlotsPerENI:     base.SlotsPerENI,
	}
}
