package main

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/coreos/go-iptables/iptables"
)

const natTable = "nat"

// Values of randomizeSNAT (AWS_VPC_K8S_CNI_RANDOMIZESNAT), as upstream.
const (
	randomizeNone       = "none"
	randomizeHashRandom = "hashrandom"
)

// snatFlag is the SNAT target's port-randomisation option: none for
// "none", --random for "hashrandom" (or when iptables lacks
// --random-fully), else --random-fully.
func snatFlag(randomize string, hasRandomFully bool) string {
	switch {
	case randomize == randomizeNone:
		return ""
	case randomize == randomizeHashRandom || !hasRandomFully:
		return "--random"
	default:
		return "--random-fully"
	}
}

// snatRules are a pod's rules in the pod's chain: multicast is left
// alone, everything else leaves with the node's address.
func snatRules(f egressFamily, nodeIP net.IP, flag, comment string) [][]string {
	snat := []string{"-j", "SNAT", "--to-source", nodeIP.String(), "-m", "comment", "--comment", comment}
	if flag != "" {
		snat = append(snat, flag)
	}
	return [][]string{
		{"-d", f.multicast, "-j", "ACCEPT", "-m", "comment", "--comment", comment},
		snat,
	}
}

// jumpRule sends the pod's traffic to its chain from POSTROUTING.
func jumpRule(podIP net.IP, chain, comment string) []string {
	return []string{"-s", podIP.String(), "-j", chain, "-m", "comment", "--comment", comment}
}

// iptablesFor opens iptables or ip6tables.
func iptablesFor(f egressFamily) (*iptables.IPTables, error) {
	proto := iptables.ProtocolIPv4
	if f.v6 {
		proto = iptables.ProtocolIPv6
	}
	ipt, err := iptables.NewWithProtocol(proto)
	if err != nil {
		return nil, fmt.Errorf("iptables: %w", err)
	}
	return ipt, nil
}

// addSNAT creates (or completes) the pod's chain and its POSTROUTING jump.
// The jump is added last, so traffic never reaches a half-built chain.
func addSNAT(ipt *iptables.IPTables, f egressFamily, nodeIP, podIP net.IP, chain, comment, randomize string) error {
	exists, err := ipt.ChainExists(natTable, chain)
	if err != nil {
		return fmt.Errorf("look up chain %s: %w", chain, err)
	}
	if !exists {
		if err := ipt.NewChain(natTable, chain); err != nil {
			return fmt.Errorf("create chain %s: %w", chain, err)
		}
	}
	for _, r := range snatRules(f, nodeIP, snatFlag(randomize, ipt.HasRandomFully()), comment) {
		if err := ipt.AppendUnique(natTable, chain, r...); err != nil {
			return fmt.Errorf("add %s rule %q: %w", chain, strings.Join(r, " "), err)
		}
	}
	if err := ipt.AppendUnique(natTable, "POSTROUTING", jumpRule(podIP, chain, comment)...); err != nil {
		return fmt.Errorf("add POSTROUTING jump to %s: %w", chain, err)
	}
	return nil
}

// delSNAT removes every POSTROUTING rule that jumps to chain, then the
// chain. It needs no pod address, so it also cleans up after a pod whose
// namespace is already gone (upstream finds the jump through the pod's
// interface address and leaves the chain behind when it cannot). Missing
// pieces are not an error.
func delSNAT(ipt *iptables.IPTables, chain string) error {
	rules, err := ipt.List(natTable, "POSTROUTING")
	if err != nil {
		return fmt.Errorf("list POSTROUTING: %w", err)
	}
	var errs []error
	for _, r := range rules {
		spec, ok := jumpSpec(r, chain)
		if !ok {
			continue
		}
		if err := ipt.Delete(natTable, "POSTROUTING", spec...); err != nil && !isNotExist(err) {
			errs = append(errs, fmt.Errorf("delete POSTROUTING jump to %s: %w", chain, err))
		}
	}
	exists, err := ipt.ChainExists(natTable, chain)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("look up chain %s: %w", chain, err))...)
	}
	if exists {
		if err := ipt.ClearAndDeleteChain(natTable, chain); err != nil && !isNotExist(err) {
			errs = append(errs, fmt.Errorf("delete chain %s: %w", chain, err))
		}
	}
	return errors.Join(errs...)
}

// jumpSpec turns a line of `iptables -S POSTROUTING` into a rule spec for
// Delete when the rule jumps to chain.
func jumpSpec(line, chain string) ([]string, bool) {
	fields, err := splitRule(line)
	if err != nil || len(fields) < 2 || fields[0] != "-A" || fields[1] != "POSTROUTING" {
		return nil, false
	}
	spec := fields[2:]
	for i := 0; i+1 < len(spec); i++ {
		if spec[i] == "-j" && spec[i+1] == chain {
			return spec, true
		}
	}
	return nil, false
}

// splitRule splits an iptables -S line into arguments, honouring the
// double quotes iptables puts around comments (with \" and \\ escapes).
func splitRule(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case quoted && c == '"':
			quoted = false
		case !quoted && c == '"':
			quoted, inWord = true, true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

func isNotExist(err error) bool {
	var e *iptables.Error
	return errors.As(err, &e) && e.IsNotExist()
}
