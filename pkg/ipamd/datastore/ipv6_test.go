package datastore

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pure parts of IPv6 mode: which CIDRs a datastore takes, the cursor
// that walks a prefix, and the free list.

func TestCheckCIDR(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ipv6  bool
		cidr  string
		want  []error // every one must match; nil means accepted
		wantN []error // none may match
	}{
		{name: "v4 /32", cidr: "10.0.0.1/32"},
		{name: "v4 /28", cidr: "10.0.0.16/28"},
		{name: "v4 /24", cidr: "10.0.0.0/24", want: []error{ErrUnsupportedCIDR}, wantN: []error{ErrWrongFamily}},
		{name: "v6 /80 in v4 store", cidr: "2600:1f14:e2a:8d02:6b1a::/80", want: []error{ErrUnsupportedCIDR, ErrWrongFamily}},
		{name: "v6 /128 in v4 store", cidr: "2001:db8::1/128", want: []error{ErrUnsupportedCIDR, ErrWrongFamily}},
		{name: "v6 /80", ipv6: true, cidr: "2600:1f14:e2a:8d02:6b1a::/80"},
		{name: "v6 /80 not masked", ipv6: true, cidr: "2600:1f14:e2a:8d02:6b1a::7/80"},
		{name: "v6 /64", ipv6: true, cidr: "2600:1f14:e2a:8d02::/64", want: []error{ErrUnsupportedIPv6CIDR}, wantN: []error{ErrWrongFamily}},
		{name: "v6 /128", ipv6: true, cidr: "2600:1f14:e2a:8d02::1/128", want: []error{ErrUnsupportedIPv6CIDR}},
		{name: "v4 /28 in v6 store", ipv6: true, cidr: "10.0.0.16/28", want: []error{ErrUnsupportedIPv6CIDR, ErrWrongFamily}},
		{name: "v4 /32 in v6 store", ipv6: true, cidr: "10.0.0.1/32", want: []error{ErrUnsupportedIPv6CIDR, ErrWrongFamily}},
		{name: "v4-mapped in v6 store", ipv6: true, cidr: "::ffff:10.0.0.0/80", want: []error{ErrUnsupportedCIDR}},
		{name: "invalid", ipv6: true, cidr: "", want: []error{ErrUnsupportedCIDR}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p netip.Prefix
			if tc.cidr != "" {
				p = netip.MustParsePrefix(tc.cidr)
			}
			err := checkCIDR(tc.ipv6, p)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.ErrorIs(t, err, w)
			}
			for _, w := range tc.wantN {
				assert.False(t, errors.Is(err, w), "%v must not be %v", err, w)
			}
		})
	}
}

func TestCursorTake(t *testing.T) {
	ips := func(ss ...string) []netip.Addr {
		out := make([]netip.Addr, len(ss))
		for i, s := range ss {
			out[i] = netip.MustParseAddr(s)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		prefix string
		taken  []string
		takes  int
		want   []netip.Addr // then exhausted if fewer than takes
	}{
		{"from the network address up", "2001:db8::/80", nil, 3, ips("2001:db8::", "2001:db8::1", "2001:db8::2")},
		{"skips taken addresses", "2001:db8::/80", []string{"2001:db8::", "2001:db8::2"}, 3, ips("2001:db8::1", "2001:db8::3", "2001:db8::4")},
		{"unmasked prefix starts at its network address", "2001:db8::9/126", nil, 1, ips("2001:db8::8")},
		{"a small prefix runs out", "2001:db8::/126", []string{"2001:db8::1"}, 4, ips("2001:db8::", "2001:db8::2", "2001:db8::3")},
		{"all taken", "2001:db8::/127", []string{"2001:db8::", "2001:db8::1"}, 1, nil},
		{"the top of the address space", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127", nil, 3, ips("ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := map[netip.Addr]bool{}
			for _, s := range tc.taken {
				taken[netip.MustParseAddr(s)] = true
			}
			calls := map[netip.Addr]int{}
			c := newCursor(netip.MustParsePrefix(tc.prefix))
			var got []netip.Addr
			for range tc.takes {
				ip, ok := c.take(func(ip netip.Addr) bool { calls[ip]++; return taken[ip] })
				if !ok {
					break
				}
				got = append(got, ip)
			}
			assert.Equal(t, tc.want, got)
			for ip, n := range calls {
				assert.Equal(t, 1, n, "%s looked at once", ip)
			}
			if len(got) < tc.takes {
				_, ok := c.take(func(netip.Addr) bool { return false })
				assert.False(t, ok, "an exhausted cursor stays exhausted")
			}
		})
	}
	// 256 addresses of a /120: the cursor crosses the last byte.
	c := newCursor(netip.MustParsePrefix("2001:db8::100/120"))
	var last netip.Addr
	n := 0
	for {
		ip, ok := c.take(func(netip.Addr) bool { return false })
		if !ok {
			break
		}
		last = ip
		n++
	}
	assert.Equal(t, 256, n)
	assert.Equal(t, netip.MustParseAddr("2001:db8::1ff"), last)
}

func TestFreeList(t *testing.T) {
	mk := func(n int) []*addr {
		out := make([]*addr, n)
		ip := netip.MustParseAddr("2001:db8::")
		for i := range out {
			out[i] = &addr{ip: ip}
			ip = ip.Next()
		}
		return out
	}
	for _, tc := range []struct {
		name string
		ops  string // p<i> push, r<i> remove; then pop until empty
		want []int
	}{
		{"fifo", "p0 p1 p2", []int{0, 1, 2}},
		{"push twice is once", "p0 p1 p0", []int{0, 1}},
		{"remove the head", "p0 p1 p2 r0", []int{1, 2}},
		{"remove the middle", "p0 p1 p2 r1", []int{0, 2}},
		{"remove the tail then push", "p0 p1 p2 r2 p3", []int{0, 1, 3}},
		{"remove what is not there", "p0 r1", []int{0}},
		{"remove everything", "p0 p1 r1 r0", nil},
		{"re-push after remove goes to the tail", "p0 p1 r0 p0", []int{1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := mk(4)
			var l freeList
			for i := 0; i < len(tc.ops); i += 3 {
				a := as[tc.ops[i+1]-'0']
				switch tc.ops[i] {
				case 'p':
					l.push(a)
				case 'r':
					l.remove(a)
				}
			}
			assert.Equal(t, len(tc.want), l.n)
			var got []int
			for a := l.pop(); a != nil; a = l.pop() {
				got = append(got, int(a.ip.As16()[15]))
				assert.False(t, a.onFree)
			}
			assert.Equal(t, tc.want, got)
			assert.Zero(t, l.n)
			assert.Nil(t, l.head)
			assert.Nil(t, l.tail)
		})
	}
}
