package networkutils

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/coreos/go-iptables/iptables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrLinkNotFound means no link has the requested MAC address (yet); the
// ENI may still be attaching.
var ErrLinkNotFound = errors.New("no link with that MAC address")

// Host programs one node's host network: the caller's network namespace,
// or the one given with WithNetNS. It is safe for concurrent use.
type Host struct {
	cfg   Config
	log   *slog.Logger
	nl    *netlink.Handle
	netns ns.NetNS // nil: the caller's namespace
	ipt   ipTables
	ipt6  ipTables // ip6tables; nil when it cannot run and the mode needs none of its rules

	linkAttempts int
	linkInterval time.Duration

	// iptMu serialises iptables reconciles: each reads chains and then
	// writes based on what it read.
	iptMu              sync.Mutex
	nftChecked         bool // guarded by iptMu; the iptables backend looked for the nftables table
	iptConnmarkDropped bool // guarded by iptMu; the nftables backend removed the iptables connmark rules

	connmarkBackend string // BackendIPTables or BackendNFTables

	// rulesMu serialises ip-rule reconciles for the same reason.
	rulesMu sync.Mutex
}

// logBackendOnce logs the connmark backend choice once per process.
var logBackendOnce sync.Once

// Option configures New.
type Option func(*options)

type options struct {
	netnsPath    string
	log          *slog.Logger
	linkAttempts int
	linkInterval time.Duration
	backend      string // connmark backend; "" is the one ConnmarkBackend chose
}

// WithNetNS makes the Host work inside the network namespace at path (for
// example /run/netns/NAME) instead of the caller's.
func WithNetNS(path string) Option { return func(o *options) { o.netnsPath = path } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithLinkRetry sets how often and how far apart a link is looked up by MAC
// before giving up with ErrLinkNotFound (default 5 attempts, 3 s apart, as
// upstream).
func WithLinkRetry(attempts int, interval time.Duration) Option {
	return func(o *options) { o.linkAttempts, o.linkInterval = attempts, interval }
}

// withConnmarkBackend overrides the backend choice (tests program either
// backend on one host).
func withConnmarkBackend(b string) Option { return func(o *options) { o.backend = b } }

// New opens the netlink and iptables access for cfg's node. Zero values of
// ConnmarkMark, MTU, VethPrefix and RandomizeSNAT take upstream defaults.
// It fails when the iptables binary cannot be run, as upstream ipamd does,
// and when ip6tables cannot be run in a mode that programs an IPv6 rule
// (cfg.IPv6 or cfg.V6Egress). Close releases the namespace handles.
func New(cfg Config, opts ...Option) (*Host, error) {
	RegisterMetrics()
	o := options{linkAttempts: 5, linkInterval: 3 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.linkAttempts < 1 {
		o.linkAttempts = 1
	}
	h := &Host{
		cfg:             cfg.withDefaults(),
		log:             o.log,
		linkAttempts:    o.linkAttempts,
		linkInterval:    o.linkInterval,
		connmarkBackend: o.backend,
	}
	if h.connmarkBackend == "" {
		h.connmarkBackend = ConnmarkBackend()
		logBackendOnce.Do(func() {
			h.log.Info("connmark backend chosen from iptables --version",
				"backend", h.connmarkBackend, "iptables", backendVersion)
		})
	}
	if err := h.open(o.netnsPath); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

func (h *Host) open(netnsPath string) error {
	if netnsPath == "" {
		nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("open netlink: %w", err)
		}
		h.nl = nl
	} else {
		target, err := ns.GetNS(netnsPath)
		if err != nil {
			return fmt.Errorf("open netns %s: %w", netnsPath, err)
		}
		h.netns = target
		nsh, err := netns.GetFromPath(netnsPath)
		if err != nil {
			return fmt.Errorf("open netns %s: %w", netnsPath, err)
		}
		defer nsh.Close() // the handle's socket keeps the namespace
		nl, err := netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("open netlink in %s: %w", netnsPath, err)
		}
		h.nl = nl
	}
	ipt, err := newNSIPTables(h.netns, iptables.ProtocolIPv4)
	if err != nil {
		return err
	}
	h.ipt = ipt
	ipt6, err := newNSIPTables(h.netns, iptables.ProtocolIPv6)
	switch {
	case err == nil:
		h.ipt6 = ipt6
	case h.cfg.IPv6 || h.cfg.V6Egress:
		return err
	default:
		// An IPv4 node without V6Egress only looks for a stale IPv6 rule.
		h.log.Info("ip6tables cannot run; no IPv6 egress rule is looked for", "error", err)
	}
	return nil
}

// Close releases the netlink handle and the namespace.
func (h *Host) Close() error {
	if h.nl != nil {
		h.nl.Close()
		h.nl = nil
	}
	if h.netns != nil {
		err := h.netns.Close()
		h.netns = nil
		return err
	}
	return nil
}

// linkByMAC finds the link with the given MAC, retrying while it is
// missing (an ENI may still be attaching).
func (h *Host) linkByMAC(ctx context.Context, mac string) (netlink.Link, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(mac))
	if err != nil {
		return nil, fmt.Errorf("parse MAC %q: %w", mac, err)
	}
	for attempt := 1; ; attempt++ {
		// An interrupted dump (links changing) counts as a miss and is retried.
		links, err := h.nl.LinkList()
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return nil, fmt.Errorf("list links: %w", err)
		}
		if err == nil {
			for _, l := range links {
				if a := l.Attrs(); a != nil && a.HardwareAddr.String() == hw.String() {
					return l, nil
				}
			}
		}
		if attempt >= h.linkAttempts {
			return nil, fmt.Errorf("%w: %s", ErrLinkNotFound, hw)
		}
		t := time.NewTimer(h.linkInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("find link %s: %w", hw, ctx.Err())
		case <-t.C:
		}
	}
}

// SetupHostNetwork prepares the node at ipamd start: primary ENI MTU, the
// egress plugin's REJECT rule (IPv4 range in IPv6 mode, IPv6 range in IPv4
// mode with V6Egress), the priority-1024 fwmark rule (IPv6 family in IPv6
// mode), the priority-1535 rules for AWS_EXTERNAL_SERVICE_CIDRS, the
// local-table rules of security groups for pods (local_rules.go), then
// UpdateSNATRules with cfg.VPCCIDRs (nothing in IPv6 mode).
func (h *Host) SetupHostNetwork(ctx context.Context) error {
	link, err := h.linkByMAC(ctx, h.cfg.PrimaryMAC)
	if err != nil {
		return fmt.Errorf("setup host network: primary link: %w", err)
	}
	if err := h.setMTU(link, h.cfg.MTU); err != nil {
		return fmt.Errorf("setup host network: %w", err)
	}
	if err := h.syncEgressRejectRules(ctx); err != nil {
		return fmt.Errorf("setup host network: %w", err)
	}
	if err := h.syncFwmarkRule(h.cfg.NodePortSupport || !h.cfg.ExternalSNAT); err != nil {
		return fmt.Errorf("setup host network: %w", err)
	}
	if err := h.syncExternalServiceRules(h.cfg.ExternalServiceCIDRs); err != nil {
		return fmt.Errorf("setup host network: %w", err)
	}
	if err := h.SyncLocalTableRules(); err != nil {
		return fmt.Errorf("setup host network: %w", err)
	}
	if err := h.UpdateSNATRules(ctx, h.cfg.VPCCIDRs); err != nil {
		return fmt.Errorf("setup host network: %w", err)
	}
	return nil
}

func (h *Host) setMTU(link netlink.Link, mtu int) error {
	if link.Attrs().MTU == mtu {
		return nil
	}
	if err := h.nl.LinkSetMTU(link, mtu); err != nil {
		return fmt.Errorf("set MTU %d on %s: %w", mtu, link.Attrs().Name, err)
	}
	return nil
}
