package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// accountID owns everything in the simulated account.
const accountID = "111122223333"

// Sim is a running simulator. All methods are safe for concurrent use.
type Sim struct {
	cfg    Config
	logger *slog.Logger
	limits typeLimits

	mu              sync.Mutex // guards the model below
	rng             *rand.Rand
	vpcBlocks       []vpcBlock // primary first
	vpcIPv6         []vpcBlock // the VPC's IPv6 blocks, none when it has no IPv6
	subnets         map[string]*subnet
	subnetOrder     []string
	sgs             map[string]bool
	instance        instance
	enis            map[string]*eni
	attachments     map[string]string      // attachment ID -> ENI ID
	clientToks      map[string]string      // CreateNetworkInterface ClientToken -> ENI ID
	trunkAssocs     map[string]*trunkAssoc // association ID -> branch-to-trunk association
	assocToks       map[string]assocToken  // Associate/DisassociateTrunkInterface ClientToken -> what it did
	usedIDs         map[string]bool        // every ID and MAC ever handed out
	nextSubnetAssoc int                    // subnet IPv6 CIDR associations made
	history         []imdsView
	links           Links // SetLinks; nil: none

	faults faults
	log    callLog
	tally  *tally // this simulator's own requests
	front  *front // limits and latency: its own, or its account's

	// Set by Account.AddNode before the node serves, never changed.
	account   *Account // nil for a standalone Sim
	accessKey string   // the node's access key ID in its account
	tokens    imdsTokens

	srvMu    sync.Mutex
	servers  []*http.Server
	ec2URL   string
	imdsURL  string
	started  bool
	shutdown bool
}

type subnet struct {
	id   string
	cidr netip.Prefix
	az   string
	tags map[string]string
	pool *addrPool
	ipv6 *subnetIPv6 // nil: an IPv4-only subnet
}

type instance struct {
	id         string
	primaryENI string
	launchTime time.Time
	tags       map[string]string
}

type eni struct {
	id, mac     string
	kind        string // interfaceType: "interface", "trunk" or "branch"
	assoc       string // a branch's trunk association ID, "" when not associated
	subnetID    string
	description string
	sgs         []string
	tags        map[string]string
	primary     netip.Addr
	secondaries []netip.Addr
	prefixes    []netip.Prefix
	ipv6s       []netip.Addr   // in assignment order
	ipv6Pfxs    []netip.Prefix // delegated /80s
	att         *attachment
}

type attachment struct {
	id                  string
	device, card        int
	status              string // attaching, attached, detaching
	deleteOnTermination bool
	attachTime          time.Time
	due                 time.Time // when attaching/detaching completes
}

// New builds the simulated VPC, its subnets and one running instance with
// its primary ENI (device 0, network card 0, a primary address, no
// secondary addresses). Call Start to serve it.
func New(cfg Config) (*Sim, error) {
	if err := applyDefaults(&cfg); err != nil {
		return nil, err
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	s := &Sim{
		cfg:         cfg,
		logger:      cfg.Logger,
		limits:      instanceTypes[cfg.InstanceType],
		rng:         rand.New(rand.NewPCG(seed, seed^0x5eed)),
		subnets:     map[string]*subnet{},
		sgs:         map[string]bool{},
		enis:        map[string]*eni{},
		attachments: map[string]string{},
		clientToks:  map[string]string{},
		trunkAssocs: map[string]*trunkAssoc{},
		assocToks:   map[string]assocToken{},
		usedIDs:     map[string]bool{},
		faults: faults{
			rng:          rand.New(rand.NewPCG(seed^0xfa17, seed)),
			exhausted:    map[string]bool{},
			unauthorized: map[string]bool{},
		},
		tally:  newTally(),
		front:  newFront(cfg.Throttle, cfg.Latency, cfg.ActionLatency, nil),
		tokens: imdsTokens{tokens: map[string]time.Time{}},
	}
	s.vpcBlocks = []vpcBlock{{cidr: netip.MustParsePrefix(cfg.VPCCIDR), assocID: "vpc-cidr-assoc-0sim00000001"}}
	for _, c := range cfg.SecondaryVPCCIDRs {
		p, err := netip.ParsePrefix(c)
		if err == nil {
			err = s.addVPCBlockLocked(p)
		}
		if err != nil {
			return nil, fmt.Errorf("ec2sim: secondary VPC CIDR %q: %v", c, err)
		}
	}
	if cfg.VPCIPv6CIDR != "" {
		s.vpcIPv6 = []vpcBlock{{cidr: netip.MustParsePrefix(cfg.VPCIPv6CIDR), assocID: "vpc-cidr-assoc-0sim60000001"}}
	}
	for _, sg := range cfg.SecurityGroupIDs {
		s.sgs[sg] = true
	}
	for _, sc := range cfg.Subnets {
		if err := s.addSubnetLocked(sc); err != nil {
			return nil, fmt.Errorf("ec2sim: %v", err)
		}
	}

	now := time.Now()
	s.instance = instance{id: s.newID("i"), launchTime: now, tags: map[string]string{}}
	primary, err := s.newENI(s.subnetOrder[0], kindInterface, "", cfg.SecurityGroupIDs, nil)
	if err != nil {
		return nil, fmt.Errorf("primary ENI: %w", err)
	}
	primary.att = &attachment{
		id: s.newID("eni-attach"), status: "attached", deleteOnTermination: true, attachTime: now,
	}
	s.attachments[primary.att.id] = primary.id
	s.instance.primaryENI = primary.id
	if cfg.PrimaryIPv6 {
		if _, err := s.assignIPv6AddrsLocked(primary, 1); err != nil {
			return nil, fmt.Errorf("primary ENI IPv6 address: %w", err)
		}
	}
	s.recordLocked(now)
	return s, nil
}

// Start listens on the EC2 and IMDS addresses and serves them until Close.
// A node of an Account is started by AddNode.
func (s *Sim) Start() error {
	if s.account != nil {
		return errors.New("ec2sim: a node of an Account is started by AddNode")
	}
	return s.listen(true)
}

// listen serves IMDS, and EC2 too when withEC2 (a node's EC2 requests
// come through its account's endpoint instead).
func (s *Sim) listen(withEC2 bool) error {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.started {
		return errors.New("ec2sim: already started")
	}
	type endpoint struct {
		l net.Listener
		h http.HandlerFunc
	}
	var eps []endpoint
	if withEC2 {
		ec2L, err := net.Listen("tcp", s.cfg.EC2Addr)
		if err != nil {
			return fmt.Errorf("ec2sim: listen EC2: %w", err)
		}
		s.ec2URL = "http://" + ec2L.Addr().String()
		eps = append(eps, endpoint{ec2L, s.serveEC2})
	}
	imdsL, err := net.Listen("tcp", s.cfg.IMDSAddr)
	if err != nil {
		for _, ep := range eps {
			ep.l.Close()
		}
		s.ec2URL = ""
		return fmt.Errorf("ec2sim: listen IMDS: %w", err)
	}
	s.imdsURL = "http://" + imdsL.Addr().String()
	eps = append(eps, endpoint{imdsL, s.serveIMDS})
	s.started = true
	for _, ep := range eps {
		s.servers = append(s.servers, serveHTTP(ep.l, ep.h, s.logger))
	}
	s.logger.Info("ec2sim started", "ec2", s.ec2URL, "imds", s.imdsURL,
		"instance", s.instance.id, "type", s.cfg.InstanceType)
	return nil
}

// serveHTTP serves h on l in the background until the server is shut down.
func serveHTTP(l net.Listener, h http.Handler, logger *slog.Logger) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("ec2sim: serve", "err", err)
		}
	}()
	return srv
}

// Close stops the simulator's servers; requests still in flight get up
// to a second to finish. Closing a node of an Account also removes it
// from the account: its access key is refused from then on.
func (s *Sim) Close() error {
	if a := s.account; a != nil {
		a.forget(s)
	}
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.shutdown {
		return nil
	}
	s.shutdown = true
	return shutdownAll(s.servers)
}

func shutdownAll(servers []*http.Server) error {
	var errs []error
	for _, srv := range servers {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, srv.Close())
		}
		cancel()
	}
	return errors.Join(errs...)
}

// EC2Endpoint is the EC2 base URL ("http://127.0.0.1:port"), "" before
// Start; for a node, its account's.
func (s *Sim) EC2Endpoint() string {
	if s.account != nil {
		return s.account.EC2Endpoint()
	}
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	return s.ec2URL
}

// IMDSEndpoint is the IMDS base URL ("http://127.0.0.1:port"), "" before Start.
func (s *Sim) IMDSEndpoint() string {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	return s.imdsURL
}

// InstanceID is the simulated instance's ID.
func (s *Sim) InstanceID() string { return s.instance.id }

// PrimaryENI is the ID of the instance's primary ENI.
func (s *Sim) PrimaryENI() string { return s.instance.primaryENI }

// Region is the simulated region.
func (s *Sim) Region() string { return s.cfg.Region }

// AZ is the instance's availability zone.
func (s *Sim) AZ() string { return s.cfg.AZ }

// VPCID is the simulated VPC's ID.
func (s *Sim) VPCID() string { return s.cfg.VPCID }

// SubnetIDs lists the subnets in configuration order, then those added
// with AddSubnet; the first holds the primary ENI.
func (s *Sim) SubnetIDs() []string {
	s.mu.Lock() // AddSubnet may add to it
	defer s.mu.Unlock()
	return append([]string(nil), s.subnetOrder...)
}
