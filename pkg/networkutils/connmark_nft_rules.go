package networkutils

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The nftables connmark backend's layout. The base chain hooks prerouting
// at priority -90 (dstnat + 10), after every DNAT chain at -100 (kube-proxy
// in either mode), so it sees the address a Service connection really goes
// to.
const (
	nftFamily      = "ip"
	nftTable       = "aws-cni"
	nftBaseChain   = "nat-prerouting"
	nftMarkChain   = "snat-mark"
	nftBasePrio    = -90
	nftTableFamily = nftables.TableFamilyIPv4
)

// nftBaseRules are the base chain's three rules, in order:
//
//	fib daddr type local return
//	iifname "<vethPrefix>*" counter jump snat-mark
//	counter meta mark set ct mark & <mark>
func nftBaseRules(vethPrefix string, mark uint32) [][]expr.Any {
	return [][]expr.Any{
		{
			&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
			&expr.Verdict{Kind: expr.VerdictReturn},
		},
		{
			// Only the prefix bytes are compared: "eni" matches eni….
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(vethPrefix)},
			&expr.Counter{},
			&expr.Verdict{Kind: expr.VerdictJump, Chain: nftMarkChain},
		},
		{
			&expr.Counter{},
			&expr.Ct{Register: 1, Key: expr.CtKeyMARK},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(mark), Xor: binaryutil.NativeEndian.PutUint32(0)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		},
	}
}

// nftExemptRule is `ip daddr <cidr> counter return`, encoded as the nft
// tool encodes it: a byte-aligned prefix loads and compares only its
// bytes; any other (and /0) loads the address and masks it.
func nftExemptRule(p netip.Prefix) []expr.Any {
	p = p.Masked()
	addr := p.Addr().As4()
	var match []expr.Any
	if bits := p.Bits(); bits > 0 && bits%8 == 0 {
		match = []expr.Any{
			&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1,
				Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: uint32(bits / 8)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr[:bits/8]},
		}
	} else {
		match = []expr.Any{
			&expr.Payload{OperationType: expr.PayloadLoad, DestRegister: 1,
				Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: netipMask4(bits), Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: addr[:]},
		}
	}
	return append(match, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictReturn})
}

func netipMask4(bits int) []byte {
	m := ^uint32(0) << (32 - bits)
	if bits == 0 {
		m = 0
	}
	return binaryutil.BigEndian.PutUint32(m)
}

// nftSetMarkRule is `counter ct mark set ct mark | <mark>`.
func nftSetMarkRule(mark uint32) []expr.Any {
	return []expr.Any{
		&expr.Counter{},
		&expr.Ct{Register: 1, Key: expr.CtKeyMARK},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(^mark), Xor: binaryutil.NativeEndian.PutUint32(mark)},
		&expr.Ct{Register: 1, Key: expr.CtKeyMARK, SourceRegister: true},
	}
}

// renderExprs gives a rule a canonical text, so a rule read back from the
// kernel and a wanted rule compare equal when they do the same thing.
// Counter values are left out: they change on their own.
func renderExprs(exprs []expr.Any) string {
	parts := make([]string, 0, len(exprs))
	for _, e := range exprs {
		parts = append(parts, renderExpr(e))
	}
	return strings.Join(parts, "; ")
}

func renderExpr(e expr.Any) string {
	switch e := e.(type) {
	case *expr.Fib:
		return fmt.Sprintf("fib saddr=%t daddr=%t mark=%t iif=%t oif=%t present=%t addrtype=%t oifres=%t oifname=%t > r%d",
			e.FlagSADDR, e.FlagDADDR, e.FlagMARK, e.FlagIIF, e.FlagOIF, e.FlagPRESENT,
			e.ResultADDRTYPE, e.ResultOIF, e.ResultOIFNAME, e.Register)
	case *expr.Cmp:
		return fmt.Sprintf("cmp r%d op%d %x", e.Register, e.Op, e.Data)
	case *expr.Meta:
		if e.SourceRegister {
			return fmt.Sprintf("meta %d < r%d", e.Key, e.Register)
		}
		return fmt.Sprintf("meta %d > r%d", e.Key, e.Register)
	case *expr.Ct:
		// The library reads a ct set back without its source register
		// (Register 0, SourceRegister false): a ct expression with no
		// destination register is a set, whatever register it reads.
		if e.SourceRegister || e.Register == 0 {
			return fmt.Sprintf("ct %d dir%d set", e.Key, e.Direction)
		}
		return fmt.Sprintf("ct %d dir%d > r%d", e.Key, e.Direction, e.Register)
	case *expr.Bitwise:
		return fmt.Sprintf("bitwise r%d > r%d len %d mask %x xor %x", e.SourceRegister, e.DestRegister, e.Len, e.Mask, e.Xor)
	case *expr.Payload:
		return fmt.Sprintf("payload op%d base%d +%d len %d > r%d < r%d", e.OperationType, e.Base, e.Offset, e.Len, e.DestRegister, e.SourceRegister)
	case *expr.Counter:
		return "counter"
	case *expr.Verdict:
		return fmt.Sprintf("verdict %d %s", e.Kind, e.Chain)
	default:
		return fmt.Sprintf("%T %+v", e, e)
	}
}
