package networkutils

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/coreos/go-iptables/iptables"
)

// ruleSpec is one iptables rule without "-A <chain>", tokenised the way
// `iptables -S` prints it (canonical option order and spelling), so a
// listed rule and a wanted rule compare equal token by token.
type ruleSpec []string

func (r ruleSpec) equal(o ruleSpec) bool {
	if len(r) != len(o) {
		return false
	}
	for i := range r {
		if r[i] != o[i] {
			return false
		}
	}
	return true
}

// comment returns the value of the rule's --comment, or "".
func (r ruleSpec) comment() string {
	for i := 0; i+1 < len(r); i++ {
		if r[i] == "--comment" {
			return r[i+1]
		}
	}
	return ""
}

// target returns the chain or target after -j / -g, or "".
func (r ruleSpec) target() string {
	for i := 0; i+1 < len(r); i++ {
		if r[i] == "-j" || r[i] == "-g" {
			return r[i+1]
		}
	}
	return ""
}

func (r ruleSpec) String() string {
	parts := make([]string, len(r))
	for i, t := range r {
		if strings.ContainsAny(t, " \t\"") {
			t = `"` + strings.ReplaceAll(t, `"`, `\"`) + `"`
		}
		parts[i] = t
	}
	return strings.Join(parts, " ")
}

// ipTables is the part of iptables (or ip6tables) this package uses.
type ipTables interface {
	ListChains(table string) ([]string, error)
	NewChain(table, chain string) error
	ClearChain(table, chain string) error
	DeleteChain(table, chain string) error
	Rules(table, chain string) ([]ruleSpec, error)
	Insert(table, chain string, pos int, spec ruleSpec) error
	Append(table, chain string, spec ruleSpec) error
	Delete(table, chain string, spec ruleSpec) error
	HasRandomFully() bool
}

// nsIPTables runs the iptables or ip6tables binary (through go-iptables)
// with every invocation forked from a thread inside the target namespace.
type nsIPTables struct {
	ipt   *iptables.IPTables
	netns ns.NetNS // nil: the caller's namespace
}

// newNSIPTables opens iptables (proto IPv4) or ip6tables (IPv6).
func newNSIPTables(netns ns.NetNS, proto iptables.Protocol) (*nsIPTables, error) {
	name := "iptables"
	if proto == iptables.ProtocolIPv6 {
		name = "ip6tables"
	}
	return newNSIPTablesBinary(netns, name, proto)
}

// newNSIPTablesBinary opens the named iptables tool (iptables-legacy, ...)
// for proto; errNoBinary when it is not installed.
func newNSIPTablesBinary(netns ns.NetNS, name string, proto iptables.Protocol) (*nsIPTables, error) {
	path, err := binaryPath(name)
	if err != nil {
		return nil, err
	}
	var ipt *iptables.IPTables
	err = inNetNS(netns, func() error {
		var err error
		ipt, err = iptables.New(iptables.IPFamily(proto), iptables.Path(path))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", name, path, err)
	}
	return &nsIPTables{ipt: ipt, netns: netns}, nil
}

// binaryPath finds an sbin tool; sbin may be missing from PATH.
func binaryPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin/", "/sbin/"} {
		if st, err := os.Stat(dir + name); err == nil && !st.IsDir() {
			return dir + name, nil
		}
	}
	return "", fmt.Errorf("%s %w in PATH, /usr/sbin or /sbin", name, errNoBinary)
}

// errNoBinary: the tool is not installed.
var errNoBinary = errors.New("binary not found")

// inNetNS runs fn on an OS thread switched into netns (ns.Do locks the
// thread, and scraps it if switching back fails). Processes that fn
// starts inherit the namespace. A nil netns runs fn directly.
func inNetNS(netns ns.NetNS, fn func() error) error {
	if netns == nil {
		return fn()
	}
	return netns.Do(func(ns.NetNS) error { return fn() })
}

func (t *nsIPTables) do(fn func() error) error { return inNetNS(t.netns, fn) }

func (t *nsIPTables) ListChains(table string) ([]string, error) {
	var chains []string
	err := t.do(func() error {
		var err error
		chains, err = t.ipt.ListChains(table)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list chains of %s: %w", table, err)
	}
	return chains, nil
}

func (t *nsIPTables) NewChain(table, chain string) error {
	if err := t.do(func() error { return t.ipt.NewChain(table, chain) }); err != nil {
		return fmt.Errorf("create chain %s/%s: %w", table, chain, err)
	}
	return nil
}

func (t *nsIPTables) ClearChain(table, chain string) error {
	if err := t.do(func() error { return t.ipt.ClearChain(table, chain) }); err != nil {
		return fmt.Errorf("flush chain %s/%s: %w", table, chain, err)
	}
	return nil
}

func (t *nsIPTables) DeleteChain(table, chain string) error {
	if err := t.do(func() error { return t.ipt.DeleteChain(table, chain) }); err != nil {
		return fmt.Errorf("delete chain %s/%s: %w", table, chain, err)
	}
	return nil
}

// Rules lists the chain's rules in order.
func (t *nsIPTables) Rules(table, chain string) ([]ruleSpec, error) {
	var lines []string
	err := t.do(func() error {
		var err error
		lines, err = t.ipt.List(table, chain)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", table, chain, err)
	}
	var rules []ruleSpec
	for _, line := range lines {
		tokens, err := splitRuleLine(line)
		if err != nil {
			return nil, fmt.Errorf("list %s/%s: %w", table, chain, err)
		}
		if len(tokens) < 2 || tokens[0] != "-A" || tokens[1] != chain {
			continue // -P / -N lines
		}
		rules = append(rules, ruleSpec(tokens[2:]))
	}
	return rules, nil
}

func (t *nsIPTables) Insert(table, chain string, pos int, spec ruleSpec) error {
	if err := t.do(func() error { return t.ipt.Insert(table, chain, pos, spec...) }); err != nil {
		return fmt.Errorf("insert into %s/%s at %d %q: %w", table, chain, pos, spec, err)
	}
	return nil
}

func (t *nsIPTables) Append(table, chain string, spec ruleSpec) error {
	if err := t.do(func() error { return t.ipt.Append(table, chain, spec...) }); err != nil {
		return fmt.Errorf("append to %s/%s %q: %w", table, chain, spec, err)
	}
	return nil
}

func (t *nsIPTables) Delete(table, chain string, spec ruleSpec) error {
	if err := t.do(func() error { return t.ipt.Delete(table, chain, spec...) }); err != nil {
		return fmt.Errorf("delete from %s/%s %q: %w", table, chain, spec, err)
	}
	return nil
}

func (t *nsIPTables) HasRandomFully() bool { return t.ipt.HasRandomFully() }

// splitRuleLine splits one `iptables -S` line into arguments: blanks
// separate, double quotes group, and a backslash escapes the next byte
// inside quotes.
func splitRuleLine(line string) ([]string, error) {
	var (
		out     []string
		cur     strings.Builder
		inQuote bool
		have    bool
	)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inQuote && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			inQuote = !inQuote
			have = true
		case !inQuote && (c == ' ' || c == '\t'):
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unbalanced quote in rule %q", line)
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}
