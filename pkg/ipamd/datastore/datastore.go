package datastore

import (
	"container/list"
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// DefaultCooldown is how long a released address rests before reuse, so a new
// pod never inherits conntrack entries that still point at the old one.
const DefaultCooldown = 30 * time.Second

// Config sets up a DataStore.
type Config struct {
	// PrefixDelegation selects which CIDRs pods get addresses from: /28
	// prefixes when true, secondary /32 addresses otherwise.
	PrefixDelegation bool
	// IPv6 makes an IPv6 datastore (upstream's ENABLE_IPv6): pods get
	// addresses from IPv6 /80 prefixes, and only those may be added.
	// Prefix delegation is implied (PrefixDelegation is then ignored and
	// reported true), as upstream supports IPv6 only with it.
	IPv6 bool
	// Cooldown is how long a released address is withheld; 0 reuses at once.
	Cooldown time.Duration
	// Checkpointer persists allocations; nil keeps them in memory only.
	Checkpointer Checkpointer
	Logger       *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// VerifyNewAddresses holds every address that joins the pool (AddCIDR)
	// as pending: not assignable until Verify or Adopt settles it
	// against the container runtime, so an address a live sandbox still
	// uses is never handed to another pod. Off, addresses are free at once.
	VerifyNewAddresses bool
	// NetworkCard is the network card whose ENIs the store holds (0: the
	// default card, the only one without ENABLE_MULTI_NIC). Every
	// Allocation the store returns carries it; nothing else depends on it.
	NetworkCard int
}

// DataStore is safe for concurrent use. One mutex guards everything; it is
// held only for in-memory steps, never across checkpoint I/O. A method that
// takes it releases it before it returns; a helper called with it held is
// named ...Locked.
type DataStore struct {
	mu      sync.Mutex
	mode    kind
	cool    time.Duration
	now     func() time.Time
	log     *slog.Logger
	enis    map[string]*eni
	byIP    map[netip.Addr]*addr
	byKey   map[IPAMKey]*addr
	free    [numKinds]freeIndex
	v6      []*cidr    // IPv6 prefixes in address order (IPv6 mode)
	cooling *list.List // *addr in release order (= expiry order)
	count   [numKinds]counters
	prefix  struct{ total, free int }
	verify  bool
	joinSeq uint64
	// disputed are the CIDRs marked disputed (disputed.go).
	disputed map[*cidr]struct{}
	// forced and forcedKeys remember what forced removals took (forced.go).
	forced     map[netip.Addr]forcedAlloc
	forcedKeys map[IPAMKey]netip.Addr
	// coolDirty: a release started a cooldown since the cooling sidecar
	// was last written (cooling_checkpoint.go). resumeCool are pending
	// addresses with a restored cooldown to resume once verified.
	coolDirty  bool
	resumeCool map[*addr]struct{}
	// coolAway are restored cooling addresses on no CIDR (the answer at
	// start left them out), with the time their rest counts from: they
	// rest when they join (cooling_restore.go).
	coolAway map[netip.Addr]time.Time

	commit *committer // nil when there is no checkpointer
	closed bool
	card   int // Config.NetworkCard
}

type counters struct{ total, assigned, cooling, pending int }

// New returns an empty DataStore. Call Close to flush and stop it.
func New(cfg Config) *DataStore {
	d := &DataStore{
		cool:    cfg.Cooldown,
		now:     cfg.Now,
		log:     cfg.Logger,
		enis:    map[string]*eni{},
		byIP:    map[netip.Addr]*addr{},
		byKey:   map[IPAMKey]*addr{},
		cooling: list.New(),
		verify:  cfg.VerifyNewAddresses,
		card:    cfg.NetworkCard,
	}
	switch {
	case cfg.IPv6:
		d.mode = kindIPv6
	case cfg.PrefixDelegation:
		d.mode = kindPrefix
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Checkpointer != nil {
		d.commit = newCommitter(d, cfg.Checkpointer)
	}
	return d
}

// PrefixDelegation reports the datastore's mode (always true in IPv6 mode).
func (d *DataStore) PrefixDelegation() bool { return d.mode != kindSecondary }

// NetworkCard is the network card whose ENIs the store holds.
func (d *DataStore) NetworkCard() int { return d.card }

// IPv6 reports whether this is an IPv6 datastore.
func (d *DataStore) IPv6() bool { return d.mode == kindIPv6 }

// Close flushes what is pending to the checkpoint and stops the store; later
// mutations fail with ErrClosed.
func (d *DataStore) Close() error {
	d.mu.Lock()
	wasClosed := d.closed
	d.closed = true
	d.mu.Unlock()
	if wasClosed || d.commit == nil {
		return nil
	}
	return d.commit.stop()
}

// ---- state transitions; all require d.mu ----

// reindexLocked puts an IPv4 CIDR where it belongs in the free index. IPv6
// prefixes are not indexed: takeV6Locked walks them. Requires d.mu.
func (d *DataStore) reindexLocked(c *cidr) {
	if c.v6 != nil {
		return
	}
	d.free[c.kind].update(c, !c.eni.excluded && !c.disputed)
}

// addUsedLocked changes how many addresses of c are busy and keeps the
// free-prefix count, the pending count of an IPv6 prefix and the free index
// in step. Requires d.mu.
func (d *DataStore) addUsedLocked(c *cidr, delta int) {
	wasIdle := c.idle()
	c.used += delta
	if c.v6 != nil && c.v6.pending {
		// The rest of a pending prefix is what is pending.
		d.count[kindIPv6].pending -= delta
	}
	d.noteIdleLocked(c, wasIdle)
	d.reindexLocked(c)
}

// noteIdleLocked keeps the free-prefix count in step after c may have
// become idle or busy. Requires d.mu.
func (d *DataStore) noteIdleLocked(c *cidr, wasIdle bool) {
	if !c.isPrefix() || wasIdle == c.idle() {
		return
	}
	if wasIdle {
		d.prefix.free--
	} else {
		d.prefix.free++
	}
}

// markFreeLocked records that a has become free: an IPv6 address joins its
// prefix's free list, to be reused before any unused one. Requires d.mu.
func markFreeLocked(a *addr) {
	if v6 := a.cidr.v6; v6 != nil {
		v6.free.push(a)
	}
}

// assignLocked gives a to key, assigned at at, whatever state a was in.
// Requires d.mu.
func (d *DataStore) assignLocked(a *addr, key IPAMKey, meta IPAMMetadata, at time.Time) {
	switch a.state {
	case stateCooling:
		d.endCooldownLocked(a)
	case statePending:
		d.settlePendingLocked(a)
	}
	// Whatever a was, it may now sit on its prefix's free list (ending a
	// cooldown puts it there): an assigned address must never stay on it,
	// or the next Assign would hand it out a second time.
	if v6 := a.cidr.v6; v6 != nil {
		v6.free.remove(a)
	}
	a.state = stateAssigned
	a.key = key
	a.meta = meta
	a.assignedAt = at
	a.unassignedAt = time.Time{}
	a.batch = nil
	if d.commit != nil {
		a.encoded = appendEntry(make([]byte, 0, 192), &CheckpointEntry{Key: key, IP: a.ip, AssignedAt: at, Metadata: meta})
	}
	a.cidr.assigned++
	d.count[a.cidr.kind].assigned++
	d.byKey[key] = a
	d.addUsedLocked(a.cidr, 1)
}

// releaseLocked frees a; with cooldown the address rests before reuse.
// Requires d.mu.
func (d *DataStore) releaseLocked(a *addr, now time.Time, cooldown bool) {
	delete(d.byKey, a.key)
	a.key = IPAMKey{}
	a.meta = IPAMMetadata{}
	a.encoded = nil
	a.cidr.assigned--
	d.count[a.cidr.kind].assigned--
	a.unassignedAt = now
	if cooldown && d.cool > 0 {
		a.state = stateCooling
		a.coolElem = d.cooling.PushBack(a)
		d.count[a.cidr.kind].cooling++
		d.coolDirty = true
		return
	}
	a.state = stateFree
	d.addUsedLocked(a.cidr, -1)
	markFreeLocked(a)
}

// endCooldownLocked makes a cooling address free. Requires d.mu.
func (d *DataStore) endCooldownLocked(a *addr) {
	d.cooling.Remove(a.coolElem)
	a.coolElem = nil
	a.state = stateFree
	d.count[a.cidr.kind].cooling--
	d.addUsedLocked(a.cidr, -1)
	markFreeLocked(a)
}

// expireLocked frees every address whose cooldown is over. Releases are
// queued in time order, so this stops at the first one still resting.
// Requires d.mu.
func (d *DataStore) expireLocked(now time.Time) {
	for e := d.cooling.Front(); e != nil; e = d.cooling.Front() {
		a := e.Value.(*addr)
		if now.Sub(a.unassignedAt) <= d.cool {
			return
		}
		d.endCooldownLocked(a)
	}
}
