package ec2sim

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// AccountConfig describes one simulated account in one Region: what its
// nodes share. Zero values get the defaults noted on each field.
type AccountConfig struct {
	Region string // every node's Region; default us-west-2

	// Throttle is the account's request limits, one bucket per action for
	// all nodes together (DefaultThrottle() for EC2's). Default nil: none.
	Throttle *ThrottleConfig

	// Latency and ActionLatency are as in Config, for every node.
	Latency       time.Duration
	ActionLatency map[string]time.Duration

	EC2Addr string // the listen address; default 127.0.0.1:0

	// Seed makes the nodes reproducible: a node whose Config.Seed is 0
	// gets one derived from it and the node's number. 0 picks one.
	Seed uint64

	Logger *slog.Logger // default: discard
}

// Credentials are a node's access key, as its instance-profile session
// would have. The account's endpoint tells nodes apart by the key ID.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
}

// ErrUnknownNode is returned by RemoveNode for an instance ID the account
// does not have.
var ErrUnknownNode = errors.New("ec2sim: no such node in the account")

// Account is one EC2 endpoint serving many simulated nodes. Each node is
// a Sim with its own VPC model, instance and IMDS endpoint; the account
// routes each EC2 request to a node by the request's access key ID and
// applies one set of request limits and latencies to them all. All
// methods are safe for concurrent use.
type Account struct {
	cfg    AccountConfig
	logger *slog.Logger
	seed   uint64
	front  *front // shared by every node
	tally  *tally // every request the endpoint answered, by action
	added  atomic.Uint64

	mu         sync.RWMutex // guards the maps and closed; never held while a node works
	byKey      map[string]*Sim
	byInstance map[string]*Sim
	closed     bool

	srvMu  sync.Mutex
	server *http.Server
	url    string
}

// NewAccount checks the configuration and builds an account with no
// nodes. Call Start to serve its EC2 endpoint.
func NewAccount(cfg AccountConfig) (*Account, error) {
	if cfg.Region == "" {
		cfg.Region = "us-west-2"
	}
	if err := checkLatencies(cfg.Latency, cfg.ActionLatency); err != nil {
		return nil, fmt.Errorf("ec2sim: account: %v", err)
	}
	if cfg.Throttle != nil {
		if err := cfg.Throttle.validate(); err != nil {
			return nil, fmt.Errorf("ec2sim: account: %v", err)
		}
	}
	if cfg.EC2Addr == "" {
		cfg.EC2Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t := newTally()
	return &Account{
		cfg: cfg, logger: cfg.Logger, seed: seed, tally: t,
		front:      newFront(cfg.Throttle, cfg.Latency, cfg.ActionLatency, t),
		byKey:      map[string]*Sim{},
		byInstance: map[string]*Sim{},
	}, nil
}

// Start listens on the EC2 address and serves it until Close.
func (a *Account) Start() error {
	a.srvMu.Lock()
	defer a.srvMu.Unlock()
	if a.server != nil {
		return errors.New("ec2sim: account already started")
	}
	l, err := net.Listen("tcp", a.cfg.EC2Addr)
	if err != nil {
		return fmt.Errorf("ec2sim: account: listen EC2: %w", err)
	}
	a.url = "http://" + l.Addr().String()
	a.server = serveHTTP(l, http.HandlerFunc(a.serveEC2), a.logger)
	a.logger.Info("ec2sim account started", "ec2", a.url, "region", a.cfg.Region)
	return nil
}

// EC2Endpoint is the account's EC2 base URL, "" before Start.
func (a *Account) EC2Endpoint() string {
	a.srvMu.Lock()
	defer a.srvMu.Unlock()
	return a.url
}

// Close stops the EC2 endpoint and every node's IMDS; no node may be
// added afterwards.
func (a *Account) Close() error {
	a.mu.Lock()
	a.closed = true
	nodes := make([]*Sim, 0, len(a.byInstance))
	for _, s := range a.byInstance {
		nodes = append(nodes, s)
	}
	a.mu.Unlock()

	a.srvMu.Lock()
	var errs []error
	if a.server != nil {
		errs = append(errs, shutdownAll([]*http.Server{a.server}))
	}
	a.srvMu.Unlock()
	for _, s := range nodes {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// AddNode builds a node (a Sim with its own VPC model and instance, as New
// does), starts its IMDS endpoint and gives it an access key ID of its
// own. Its EC2 requests go to the account's endpoint: Sim.EC2Endpoint
// returns it. Limits, latency, the EC2 address and the Region are the
// account's, so cfg leaves Throttle, Latency, ActionLatency and EC2Addr
// unset and Region unset or equal to the account's.
func (a *Account) AddNode(cfg Config) (*Sim, Credentials, error) {
	switch {
	case cfg.Throttle != nil, cfg.Latency != 0, cfg.ActionLatency != nil:
		return nil, Credentials{}, errors.New("ec2sim: add node: request limits and latency are the account's; set them in AccountConfig")
	case cfg.EC2Addr != "":
		return nil, Credentials{}, errors.New("ec2sim: add node: a node has no EC2 address of its own; it is served by the account's endpoint")
	case cfg.Region != "" && cfg.Region != a.cfg.Region:
		return nil, Credentials{}, fmt.Errorf("ec2sim: add node: Region %s, but the account serves %s", cfg.Region, a.cfg.Region)
	}
	cfg.Region = a.cfg.Region
	n := a.added.Add(1)
	if cfg.Seed == 0 {
		cfg.Seed = a.seed + n*0x9e3779b97f4a7c15 // distinct IDs per node
	}
	if cfg.Logger == nil {
		cfg.Logger = a.logger
	}
	s, err := New(cfg)
	if err != nil {
		return nil, Credentials{}, fmt.Errorf("ec2sim: add node %d: %w", n, err)
	}
	creds := Credentials{AccessKeyID: fmt.Sprintf("ASIASIM%013d", n), SecretAccessKey: newSecret()}
	s.front = a.front
	s.account = a
	s.accessKey = creds.AccessKeyID
	if err := s.listen(false); err != nil {
		return nil, Credentials{}, fmt.Errorf("ec2sim: add node %d: %w", n, err)
	}

	a.mu.Lock()
	var refused error
	switch _, dup := a.byInstance[s.InstanceID()]; {
	case a.closed:
		refused = errors.New("ec2sim: add node: the account is closed")
	case dup:
		refused = fmt.Errorf("ec2sim: add node %d: instance ID %s is taken by another node (same Config.Seed?)", n, s.InstanceID())
	default:
		a.byKey[creds.AccessKeyID] = s
		a.byInstance[s.InstanceID()] = s
	}
	a.mu.Unlock()
	if refused != nil {
		s.account = nil // not registered: nothing to forget
		_ = s.Close()
		return nil, Credentials{}, refused
	}
	return s, creds, nil
}

// RemoveNode closes the node with the instance ID (its IMDS stops) and
// forgets its access key: its later EC2 requests fail with AuthFailure.
func (a *Account) RemoveNode(instanceID string) error {
	a.mu.RLock()
	s := a.byInstance[instanceID]
	a.mu.RUnlock()
	if s == nil {
		return fmt.Errorf("remove node %s: %w", instanceID, ErrUnknownNode)
	}
	return s.Close()
}

// Nodes is the number of nodes in the account.
func (a *Account) Nodes() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.byInstance)
}

// forget removes a node from the routing maps, if it is still there.
func (a *Account) forget(s *Sim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byKey[s.accessKey] == s {
		delete(a.byKey, s.accessKey)
		delete(a.byInstance, s.InstanceID())
	}
}

// node finds the node an access key ID belongs to.
func (a *Account) node(accessKey string) *Sim {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.byKey[accessKey]
}

func newSecret() string {
	var b [30]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:]) // 40 characters, as AWS secrets
}
