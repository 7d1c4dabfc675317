package ec2sim

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	imdsTokenHeader    = "X-aws-ec2-metadata-token"
	imdsTokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
	imdsMaxTokenTTL    = 21600
)

// imdsTokens holds the IMDSv2 session tokens handed out.
type imdsTokens struct {
	mu     sync.Mutex
	tokens map[string]time.Time // token -> expiry
}

func (t *imdsTokens) issue(ttl time.Duration) string {
	var b [40]byte
	_, _ = rand.Read(b[:])
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	for k, exp := range t.tokens {
		if now.After(exp) {
			delete(t.tokens, k)
		}
	}
	t.tokens[tok] = now.Add(ttl)
	return tok
}

func (t *imdsTokens) valid(tok string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	exp, ok := t.tokens[tok]
	return ok && time.Now().Before(exp)
}

// serveIMDS answers IMDSv2: a PUT for a token, then GETs carrying it.
func (s *Sim) serveIMDS(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/latest/api/token" {
		s.imdsToken(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if !s.tokens.valid(r.Header.Get(imdsTokenHeader)) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	body, ok := s.imdsGet(r.URL.Path)
	if !ok {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write([]byte(body))
}

func (s *Sim) imdsToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(imdsTokenTTLHeader))
	if err != nil || ttl < 1 || ttl > imdsMaxTokenTTL {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	tok := s.tokens.issue(time.Duration(ttl) * time.Second)
	w.Header().Set(imdsTokenTTLHeader, strconv.Itoa(ttl))
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(tok))
}

// imdsGet resolves a metadata path against the (possibly lagged) view.
func (s *Sim) imdsGet(path string) (string, bool) {
	if path == "/latest/dynamic/instance-identity/document" {
		return s.identityDocument(), true
	}
	rest, ok := strings.CutPrefix(path, "/latest/meta-data")
	if !ok {
		return "", false
	}
	rest = strings.Trim(rest, "/")

	lag, _ := s.faults.lags()
	s.mu.Lock()
	now := time.Now()
	s.advanceLocked(now)
	view := s.viewAt(now.Add(-lag))
	primary := s.enis[s.instance.primaryENI]
	primaryIP, primaryMAC := primary.primary.String(), primary.mac
	blocks := s.blockPrefixes() // VPC-wide, so never lagged
	blocks6 := s.vpcIPv6Strings()
	s.mu.Unlock()
	var nodeIPv6 string // the primary ENI's first IPv6 address, as the view has it
	if v6 := view.enis[primaryMAC].IPv6s; len(v6) > 0 {
		nodeIPv6 = v6[0]
	}

	switch rest {
	case "":
		top := []string{"instance-id", "instance-type"}
		if nodeIPv6 != "" {
			top = append(top, "ipv6")
		}
		return lines(append(top, "local-ipv4", "mac", "network/", "placement/")...), true
	case "ipv6":
		return nodeIPv6, nodeIPv6 != ""
	case "instance-id":
		return s.instance.id, true
	case "instance-type":
		return s.cfg.InstanceType, true
	case "local-ipv4":
		return primaryIP, true
	case "mac":
		return primaryMAC, true
	case "placement":
		return lines("availability-zone", "region"), true
	case "placement/availability-zone":
		return s.cfg.AZ, true
	case "placement/region":
		return s.cfg.Region, true
	case "network":
		return "interfaces/", true
	case "network/interfaces":
		return "macs/", true
	case "network/interfaces/macs":
		macs := make([]string, 0, len(view.enis))
		for mac := range view.enis {
			macs = append(macs, mac+"/")
		}
		sort.Strings(macs)
		return lines(macs...), true
	}
	macPath, ok := strings.CutPrefix(rest, "network/interfaces/macs/")
	if !ok {
		return "", false
	}
	mac, field, _ := strings.Cut(macPath, "/")
	e, ok := view.enis[mac]
	if !ok {
		return "", false
	}
	return s.imdsENIField(e, field, blocks, blocks6)
}

// imdsENIField serves network/interfaces/macs/<mac>/<field>; blocks are
// the VPC's IPv4 blocks, primary first, and blocks6 its IPv6 ones. An
// IPv6 field is listed, and served, only when it has a value, as in IMDS.
func (s *Sim) imdsENIField(e imdsENI, field string, blocks []netip.Prefix, blocks6 []string) (string, bool) {
	switch field {
	case "":
		fields := []string{"device-number", "interface-id"}
		if len(e.Prefixes) > 0 {
			fields = append(fields, "ipv4-prefix")
		}
		if len(e.IPv6Prefixes) > 0 {
			fields = append(fields, "ipv6-prefix")
		}
		if len(e.IPv6s) > 0 {
			fields = append(fields, "ipv6s")
		}
		fields = append(fields, "local-ipv4s", "mac", "network-card", "owner-id", "security-group-ids", "subnet-id")
		fields = append(fields, "subnet-ipv4-cidr-block")
		if e.SubnetIPv6CIDR != "" {
			fields = append(fields, "subnet-ipv6-cidr-blocks")
		}
		fields = append(fields, "vpc-id", "vpc-ipv4-cidr-block", "vpc-ipv4-cidr-blocks")
		if len(blocks6) > 0 {
			fields = append(fields, "vpc-ipv6-cidr-blocks")
		}
		return lines(fields...), true
	case "ipv6s":
		return lines(e.IPv6s...), len(e.IPv6s) > 0
	case "ipv6-prefix":
		return lines(e.IPv6Prefixes...), len(e.IPv6Prefixes) > 0
	case "subnet-ipv6-cidr-blocks":
		return e.SubnetIPv6CIDR, e.SubnetIPv6CIDR != ""
	case "vpc-ipv6-cidr-blocks":
		return lines(blocks6...), len(blocks6) > 0
	case "device-number":
		return strconv.Itoa(e.Device), true
	case "interface-id":
		return e.ID, true
	case "ipv4-prefix":
		return lines(e.Prefixes...), len(e.Prefixes) > 0
	case "local-ipv4s":
		return lines(e.IPv4s...), true
	case "mac":
		return e.MAC, true
	case "network-card":
		// IMDS has served it since build 2020-11-01 ("the index of the
		// network card") and documents no instance types without it, so
		// it is served for every ENI, card 0 and single-card types too.
		return strconv.Itoa(e.Card), true
	case "owner-id":
		return accountID, true
	case "security-group-ids":
		return lines(e.SecurityGroupIDs...), true
	case "subnet-id":
		return e.SubnetID, true
	case "subnet-ipv4-cidr-block":
		return e.SubnetCIDR, true
	case "vpc-id":
		return s.cfg.VPCID, true
	case "vpc-ipv4-cidr-block":
		return blocks[0].String(), true
	case "vpc-ipv4-cidr-blocks":
		out := make([]string, len(blocks))
		for i, b := range blocks {
			out[i] = b.String()
		}
		return lines(out...), true
	}
	return "", false
}

// identityDocument is /latest/dynamic/instance-identity/document.
func (s *Sim) identityDocument() string {
	s.mu.Lock()
	ip := s.enis[s.instance.primaryENI].primary.String()
	s.mu.Unlock()
	doc := map[string]any{
		"accountId":        accountID,
		"architecture":     "x86_64",
		"availabilityZone": s.cfg.AZ,
		"imageId":          "ami-0sim00000001",
		"instanceId":       s.instance.id,
		"instanceType":     s.cfg.InstanceType,
		"pendingTime":      s.instance.launchTime.UTC().Format(time.RFC3339),
		"privateIp":        ip,
		"region":           s.cfg.Region,
		"version":          "2017-09-30",
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return string(b)
}

func lines(v ...string) string { return strings.Join(v, "\n") }
