package datastore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/ipamd/datastore/upstreamschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixturePath is a checkpoint written by hand from the upstream schema, laid
// out the way upstream's encoder writes it (compact, one trailing newline).
const fixturePath = "testdata/upstream-ipam.json"

// entryView is a CheckpointEntry with the time reduced to Unix nanoseconds:
// a decoded time has another location and no monotonic reading, so views
// compare with == where CheckpointEntry values would not.
type entryView struct {
	Key  IPAMKey
	IP   netip.Addr
	AtNS int64
	Meta IPAMMetadata
}

func viewsOf(entries []CheckpointEntry) []entryView {
	out := make([]entryView, 0, len(entries))
	for _, e := range entries {
		out = append(out, entryView{Key: e.Key, IP: e.IP, AtNS: e.AssignedAt.UnixNano(), Meta: e.Metadata})
	}
	return out
}

// sortedViews is viewsOf in a fixed order, for sets written from a map.
func sortedViews(entries []CheckpointEntry) []entryView {
	out := viewsOf(entries)
	slices.SortFunc(out, func(a, b entryView) int {
		if c := a.IP.Compare(b.IP); c != 0 {
			return c
		}
		return strings.Compare(a.Key.String(), b.Key.String())
	})
	return out
}

// containerID returns a realistic 64-hex-digit container ID.
func containerID(i int) string {
	return fmt.Sprintf("%016x%016x%016x%016x", 0x9f3c2a71b8d4e605+uint64(i), uint64(i)*0x2545f4914f6cdd1d, 0xc0ffee, i)
}

// fixtureEntries is what testdata/upstream-ipam.json holds.
func fixtureEntries() []CheckpointEntry {
	return []CheckpointEntry{
		{
			Key:        IPAMKey{NetworkName: "aws-cni", ContainerID: "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb", IfName: "eth0"},
			IP:         netip.MustParseAddr("192.168.12.37"),
			AssignedAt: time.Unix(0, 1718031234567891234),
			Metadata:   IPAMMetadata{K8SPodNamespace: "kube-system", K8SPodName: "coredns-5b9dfbf96-8xk2p"},
		},
		{
			Key:        IPAMKey{NetworkName: "_migrated-from-cri", ContainerID: "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d", IfName: "unknown"},
			IP:         netip.MustParseAddr("192.168.12.41"),
			AssignedAt: time.Unix(0, 1718030000000000000),
		},
		{
			Key:        IPAMKey{NetworkName: "aws-cni", ContainerID: "2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6", IfName: "eth0"},
			IP:         netip.MustParseAddr("192.168.12.53"),
			AssignedAt: time.Unix(0, 1718032101000000007),
			Metadata:   IPAMMetadata{K8SPodNamespace: "default", K8SPodName: "nginx-7c5ddbdf54-q2v7m", InterfacesCount: 2},
		},
		{
			Key:        IPAMKey{NetworkName: "aws-cni", ContainerID: "18ac3e7343f016890c510e93f935261169d9e3f565436429830faf0934f4f8e4", IfName: "eth0"},
			IP:         netip.MustParseAddr("192.168.12.66"),
			AssignedAt: time.Unix(0, 1718032999123000000),
			Metadata:   IPAMMetadata{K8SPodNamespace: "amazon-cloudwatch", K8SPodName: "cloudwatch-agent-4rkzm"},
		},
	}
}

// ---- a decoder/encoder that knows only the upstream schema ----
//
// These mirror the upstream document field by field from the published
// schema: nothing of ours is reused, so a drift in our codec shows up here.

func upstreamDocOf(entries []CheckpointEntry) upstreamschema.Doc {
	doc := upstreamschema.Doc{Version: upstreamschema.Version, Allocations: []upstreamschema.Entry{}}
	for _, e := range entries {
		ue := upstreamschema.Entry{
			NetworkName:         e.Key.NetworkName,
			ContainerID:         e.Key.ContainerID,
			IfName:              e.Key.IfName,
			AllocationTimestamp: e.AssignedAt.UnixNano(),
			Metadata: upstreamschema.Metadata{
				K8SPodNamespace: e.Metadata.K8SPodNamespace,
				K8SPodName:      e.Metadata.K8SPodName,
				InterfacesCount: e.Metadata.InterfacesCount,
			},
		}
		if e.IP.Is4() {
			ue.IPv4 = e.IP.String()
		} else {
			ue.IPv6 = e.IP.String()
		}
		doc.Allocations = append(doc.Allocations, ue)
	}
	return doc
}

// upstreamEncode writes doc the way upstream does: encoding/json's Encoder
// with its defaults (HTML escaping on, one trailing newline).
func upstreamEncode(t testing.TB, doc upstreamschema.Doc) []byte {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, json.NewEncoder(&buf).Encode(doc))
	return buf.Bytes()
}

// upstreamStrictDecode decodes data as a reader that knows only the upstream
// schema and refuses anything else.
func upstreamStrictDecode(data []byte) (upstreamschema.Doc, error) {
	var doc upstreamschema.Doc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return doc, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return doc, fmt.Errorf("trailing data after the document (%v)", err)
	}
	return doc, nil
}

// jsonKeyOrder returns the keys of every object in data in document order,
// one slice per object, inner objects before the object that holds them.
func jsonKeyOrder(t testing.TB, data []byte) [][]string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	var out [][]string
	var value func()
	value = func() {
		tok, err := dec.Token()
		require.NoError(t, err)
		switch tok {
		case json.Delim('{'):
			var keys []string
			for dec.More() {
				k, err := dec.Token()
				require.NoError(t, err)
				keys = append(keys, k.(string))
				value()
			}
			_, err = dec.Token() // '}'
			require.NoError(t, err)
			out = append(out, keys)
		case json.Delim('['):
			for dec.More() {
				value()
			}
			_, err = dec.Token() // ']'
			require.NoError(t, err)
		}
	}
	value()
	return out
}

// asDecoded is s as any JSON reader gets it back from a writer that turns
// each invalid UTF-8 byte into U+FFFD (both encoding/json and ours do).
func asDecoded(s string) string { return string([]rune(s)) }

func TestCheckpointRoundTrip(t *testing.T) {
	at := time.Unix(1_718_000_000, 123_456_789)
	ip := netip.MustParseAddr("10.0.3.7")
	tests := []struct {
		name    string
		entries []CheckpointEntry
		// want is what decoding gives back when it differs from entries.
		want []CheckpointEntry
	}{
		{name: "none", entries: nil},
		{name: "empty slice", entries: []CheckpointEntry{}},
		{name: "full entry", entries: []CheckpointEntry{
			{Key: key(containerID(1)), IP: ip, AssignedAt: at, Metadata: meta("web-0")},
		}},
		{name: "empty metadata", entries: []CheckpointEntry{
			{Key: key(containerID(2)), IP: ip, AssignedAt: at},
		}},
		{name: "interfaces count only", entries: []CheckpointEntry{
			{Key: key(containerID(3)), IP: ip, AssignedAt: at, Metadata: IPAMMetadata{InterfacesCount: 3}},
		}},
		{name: "negative interfaces count", entries: []CheckpointEntry{
			{Key: key(containerID(3)), IP: ip, AssignedAt: at, Metadata: IPAMMetadata{InterfacesCount: -1}},
		}},
		{name: "ipv6", entries: []CheckpointEntry{
			{Key: key(containerID(4)), IP: netip.MustParseAddr("2001:db8:1:2::a"), AssignedAt: at, Metadata: meta("v6")},
		}},
		{name: "ipv4-mapped ipv6 stays ipv6", entries: []CheckpointEntry{
			{Key: key(containerID(4)), IP: netip.MustParseAddr("::ffff:10.1.2.3"), AssignedAt: at},
		}},
		{name: "quotes and backslashes", entries: []CheckpointEntry{
			{Key: IPAMKey{NetworkName: `net"work`, ContainerID: `c\d\\e`, IfName: `"\`}, IP: ip, AssignedAt: at,
				Metadata: IPAMMetadata{K8SPodNamespace: `ns"\"`, K8SPodName: `\u0041 is not an escape here`}},
		}},
		{name: "control characters", entries: []CheckpointEntry{
			{Key: IPAMKey{NetworkName: "a\x00b", ContainerID: "\n\r\t\b\f", IfName: "\x1f\x7f"}, IP: ip, AssignedAt: at,
				Metadata: IPAMMetadata{K8SPodName: "line1\nline2"}},
		}},
		{name: "unicode", entries: []CheckpointEntry{
			{Key: IPAMKey{NetworkName: "réseau", ContainerID: "容器-🚀", IfName: "eth0"}, IP: ip, AssignedAt: at,
				Metadata: IPAMMetadata{K8SPodNamespace: "пространство", K8SPodName: "pod\u2028\u2029\ufffd"}},
		}},
		{name: "html characters", entries: []CheckpointEntry{
			{Key: key("<script>&amp;</script>"), IP: ip, AssignedAt: at},
		}},
		{
			name: "invalid utf-8 becomes U+FFFD per bad byte",
			entries: []CheckpointEntry{
				{Key: IPAMKey{NetworkName: "\xff", ContainerID: "a\xc3", IfName: "\xed\xa0\x80"}, IP: ip, AssignedAt: at,
					Metadata: IPAMMetadata{K8SPodName: "ok\xe2\x82"}},
			},
			want: []CheckpointEntry{
				{Key: IPAMKey{NetworkName: "\ufffd", ContainerID: "a\ufffd", IfName: "\ufffd\ufffd\ufffd"}, IP: ip, AssignedAt: at,
					Metadata: IPAMMetadata{K8SPodName: "ok\ufffd\ufffd"}},
			},
		},
		{name: "timestamps keep nanoseconds, before and after the epoch", entries: []CheckpointEntry{
			{Key: key("a"), IP: ip, AssignedAt: time.Unix(0, 1)},
			{Key: key("b"), IP: ip.Next(), AssignedAt: time.Unix(0, -999)},
			{Key: key("c"), IP: ip.Next().Next(), AssignedAt: time.Unix(0, 1<<62+7)},
		}},
		{name: "fixture", entries: fixtureEntries()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := EncodeCheckpoint(nil, tc.entries)
			require.True(t, json.Valid(data), "%s", data)
			require.True(t, bytes.HasSuffix(data, []byte("}\n")), "one trailing newline, as upstream's encoder")
			got, err := DecodeCheckpoint(data)
			require.NoError(t, err)
			want := tc.want
			if want == nil {
				want = tc.entries
			}
			assert.Equal(t, viewsOf(want), viewsOf(got))

			// Appending to a buffer that already holds data keeps it.
			prefixed := EncodeCheckpoint([]byte("xyz"), tc.entries)
			assert.Equal(t, append([]byte("xyz"), data...), prefixed)
		})
	}
}

func TestCheckpointEmptyAllocationsIsArray(t *testing.T) {
	for _, entries := range [][]CheckpointEntry{nil, {}} {
		data := EncodeCheckpoint(nil, entries)
		assert.Equal(t, "{\"version\":\"vpc-cni-ipam/1\",\"allocations\":[]}\n", string(data))
		var raw map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(data, &raw))
		assert.Equal(t, "[]", string(raw["allocations"]), "never null: upstream ranges over it")
		got, err := DecodeCheckpoint(data)
		require.NoError(t, err)
		assert.Empty(t, got)
	}
}

func TestCheckpointDecodesUpstreamFixture(t *testing.T) {
	data, err := os.ReadFile(fixturePath)
	require.NoError(t, err)
	got, err := DecodeCheckpoint(data)
	require.NoError(t, err)
	assert.Equal(t, viewsOf(fixtureEntries()), viewsOf(got))
	assert.Equal(t, migratedKey(key("3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d")), got[1].Key)

	// Written back by us it is byte for byte the file upstream would write.
	assert.Equal(t, string(data), string(EncodeCheckpoint(nil, got)))
}

// TestCheckpointReadableByUpstream checks that our file is accepted by a
// reader that knows only the upstream schema, with the keys in upstream's
// order, and that upstream's file is accepted by us.
func TestCheckpointReadableByUpstream(t *testing.T) {
	at := time.Unix(1_718_000_000, 5)
	ip := netip.MustParseAddr("10.0.3.7")
	many := make([]CheckpointEntry, 0, 50)
	for i := range 50 {
		many = append(many, CheckpointEntry{
			Key: key(containerID(i)), IP: netip.AddrFrom4([4]byte{10, 1, byte(i / 200), byte(i % 200)}),
			AssignedAt: at.Add(time.Duration(i) * time.Millisecond), Metadata: IPAMMetadata{K8SPodNamespace: "ns", K8SPodName: podName(i), InterfacesCount: i % 3},
		})
	}
	tests := []struct {
		name    string
		entries []CheckpointEntry
		// sameBytes: upstream's encoder writes exactly our bytes. It escapes
		// control characters, <, >, &, U+2028 and U+2029 differently (but
		// equivalently), so cases with those only compare by meaning.
		sameBytes bool
	}{
		{"empty", nil, true},
		{"fixture", fixtureEntries(), true},
		{"fifty pods", many, true},
		{"ipv6", []CheckpointEntry{{Key: key("v6"), IP: netip.MustParseAddr("2001:db8::5"), AssignedAt: at}}, true},
		{"quotes, backslashes, unicode", []CheckpointEntry{{
			Key: IPAMKey{NetworkName: `a"b`, ContainerID: `c\d`, IfName: "日本"}, IP: ip, AssignedAt: at,
			Metadata: IPAMMetadata{K8SPodNamespace: "ñ", K8SPodName: "🚀"},
		}}, true},
		{"invalid utf-8", []CheckpointEntry{{Key: key("bad\xff\xfe"), IP: ip, AssignedAt: at}}, true},
		{"control characters", []CheckpointEntry{{Key: key("a\nb\tc\x01"), IP: ip, AssignedAt: at}}, false},
		{"html and line separators", []CheckpointEntry{{Key: key("<a&b>\u2028\u2029"), IP: ip, AssignedAt: at}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ours := EncodeCheckpoint(nil, tc.entries)
			doc, err := upstreamStrictDecode(ours)
			require.NoError(t, err, "upstream's reader must accept our file:\n%s", ours)
			want := upstreamDocOf(tc.entries)
			for i := range want.Allocations {
				w := &want.Allocations[i]
				w.NetworkName, w.ContainerID, w.IfName = asDecoded(w.NetworkName), asDecoded(w.ContainerID), asDecoded(w.IfName)
				w.Metadata.K8SPodNamespace, w.Metadata.K8SPodName = asDecoded(w.Metadata.K8SPodNamespace), asDecoded(w.Metadata.K8SPodName)
			}
			assert.Equal(t, want, doc)

			raw := upstreamDocOf(tc.entries) // strings as given, not yet made valid
			theirs := upstreamEncode(t, raw)
			if tc.sameBytes {
				assert.Equal(t, string(theirs), string(ours), "same bytes as upstream's encoder")
				marshaled, err := json.Marshal(raw)
				require.NoError(t, err)
				assert.Equal(t, string(marshaled)+"\n", string(ours), "json.Marshal plus the encoder's newline")
			}
			assert.Equal(t, jsonKeyOrder(t, theirs), jsonKeyOrder(t, ours), "keys in upstream's order")

			// And the other way: what upstream writes, we read.
			got, err := DecodeCheckpoint(theirs)
			require.NoError(t, err)
			decodedOurs, err := DecodeCheckpoint(ours)
			require.NoError(t, err)
			assert.Equal(t, viewsOf(decodedOurs), viewsOf(got))
		})
	}
}

func TestCheckpointKeyOrder(t *testing.T) {
	entries := []CheckpointEntry{
		{Key: key("a"), IP: netip.MustParseAddr("10.0.0.1"), AssignedAt: time.Unix(1, 2),
			Metadata: IPAMMetadata{K8SPodNamespace: "ns", K8SPodName: "p", InterfacesCount: 2}},
		{Key: key("b"), IP: netip.MustParseAddr("2001:db8::1"), AssignedAt: time.Unix(1, 2),
			Metadata: IPAMMetadata{K8SPodName: "p"}},
	}
	got := jsonKeyOrder(t, EncodeCheckpoint(nil, entries))
	want := [][]string{
		{"k8sPodNamespace", "k8sPodName", "interfacesCount"},
		{"networkName", "containerID", "ifName", "ipv4", "allocationTimestamp", "metadata"},
		{"k8sPodName"},
		{"networkName", "containerID", "ifName", "ipv6", "allocationTimestamp", "metadata"},
		{"version", "allocations"},
	}
	assert.Equal(t, want, got)
}

func TestDecodeCheckpointErrors(t *testing.T) {
	good := string(EncodeCheckpoint(nil, fixtureEntries()))
	entry := func(ipField string) string {
		return `{"version":"vpc-cni-ipam/1","allocations":[{"networkName":"aws-cni","containerID":"c","ifName":"eth0",` +
			ipField + `"allocationTimestamp":1,"metadata":{}}]}`
	}
	tests := []struct {
		name string
		data string
		want error
	}{
		{"empty file", "", ErrCheckpointCorrupt},
		{"whitespace only", " \n\t", ErrCheckpointCorrupt},
		{"truncated in the middle", good[:len(good)/2], ErrCheckpointCorrupt},
		{"truncated by one byte", strings.TrimSuffix(good, "}\n"), ErrCheckpointCorrupt},
		{"NUL-filled (lost page after a crash)", "\x00\x00\x00\x00", ErrCheckpointCorrupt},
		{"trailing garbage", good + "{", ErrCheckpointCorrupt},
		{"top-level array", `[]`, ErrCheckpointCorrupt},
		{"allocations is an object", `{"version":"vpc-cni-ipam/1","allocations":{}}`, ErrCheckpointCorrupt},
		{"version is a number", `{"version":1,"allocations":[]}`, ErrCheckpointCorrupt},
		{"timestamp is a string", `{"version":"vpc-cni-ipam/1","allocations":[{"ipv4":"10.0.0.1","allocationTimestamp":"1"}]}`, ErrCheckpointCorrupt},
		{"timestamp is a float", `{"version":"vpc-cni-ipam/1","allocations":[{"ipv4":"10.0.0.1","allocationTimestamp":1.5}]}`, ErrCheckpointCorrupt},
		{"timestamp overflows int64", `{"version":"vpc-cni-ipam/1","allocations":[{"ipv4":"10.0.0.1","allocationTimestamp":99999999999999999999}]}`, ErrCheckpointCorrupt},
		{"bad ipv4", entry(`"ipv4":"10.0.0.300",`), ErrCheckpointCorrupt},
		{"ipv4 with leading zeros", entry(`"ipv4":"010.0.0.1",`), ErrCheckpointCorrupt},
		{"bad ipv6", entry(`"ipv6":"2001:db8:::1",`), ErrCheckpointCorrupt},
		{"cidr instead of address", entry(`"ipv4":"10.0.0.1/32",`), ErrCheckpointCorrupt},
		{"ipv6 with a zone", entry(`"ipv6":"fe80::1%eth0",`), ErrCheckpointCorrupt},
		{"ipv6 with a zone that needs escaping", entry(`"ipv6":"fe80::1%a"b",`), ErrCheckpointCorrupt},
		{"no address", entry(``), ErrCheckpointCorrupt},
		{"empty address", entry(`"ipv4":"",`), ErrCheckpointCorrupt},
		{"wrong version", `{"version":"vpc-cni-ipam/2","allocations":[]}`, ErrCheckpointVersion},
		{"wrong version, entries not looked at", `{"version":"v2","allocations":[{"ipv4":"not an ip"}]}`, ErrCheckpointVersion},
		// No version at all is an unknown schema, as upstream treats it.
		{"empty object", `{}`, ErrCheckpointVersion},
		{"null", `null`, ErrCheckpointVersion},
		{"empty version", `{"version":"","allocations":[]}`, ErrCheckpointVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeCheckpoint([]byte(tc.data))
			require.ErrorIs(t, err, tc.want)
			other := ErrCheckpointVersion
			if tc.want == ErrCheckpointVersion {
				other = ErrCheckpointCorrupt
			}
			assert.NotErrorIs(t, err, other)
			assert.Nil(t, got)
		})
	}
}

func TestDecodeCheckpointTolerates(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []entryView
	}{
		{"allocations missing", `{"version":"vpc-cni-ipam/1"}`, []entryView{}},
		{"allocations null", `{"version":"vpc-cni-ipam/1","allocations":null}`, []entryView{}},
		{"pretty-printed", "{\n  \"version\": \"vpc-cni-ipam/1\",\n  \"allocations\": [\n    {\"ipv4\": \"10.0.0.1\", \"allocationTimestamp\": 5}\n  ]\n}",
			[]entryView{{IP: netip.MustParseAddr("10.0.0.1"), AtNS: 5}}},
		{"fields a newer writer might add", `{"version":"vpc-cni-ipam/1","extra":1,"allocations":[{"ipv4":"10.0.0.1","allocationTimestamp":5,"future":{"x":[1]},"metadata":{"k8sPodName":"p","other":"y"}}]}`,
			[]entryView{{IP: netip.MustParseAddr("10.0.0.1"), AtNS: 5, Meta: IPAMMetadata{K8SPodName: "p"}}}},
		{"keys in any order", `{"allocations":[{"metadata":{"interfacesCount":2},"allocationTimestamp":7,"ipv6":"2001:db8::1","ifName":"eth1","containerID":"c","networkName":"n"}],"version":"vpc-cni-ipam/1"}`,
			[]entryView{{Key: IPAMKey{NetworkName: "n", ContainerID: "c", IfName: "eth1"}, IP: netip.MustParseAddr("2001:db8::1"), AtNS: 7, Meta: IPAMMetadata{InterfacesCount: 2}}}},
		{"no timestamp", `{"version":"vpc-cni-ipam/1","allocations":[{"ipv4":"10.0.0.1"}]}`,
			[]entryView{{IP: netip.MustParseAddr("10.0.0.1")}}},
		{"escaped strings", `{"version":"vpc-cni-ipam/1","allocations":[{"networkName":"\u0061\n\"\\\/","ipv4":"10.0.0.1","allocationTimestamp":1}]}`,
			[]entryView{{Key: IPAMKey{NetworkName: "a\n\"\\/"}, IP: netip.MustParseAddr("10.0.0.1"), AtNS: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeCheckpoint([]byte(tc.data))
			require.NoError(t, err)
			assert.Equal(t, tc.want, viewsOf(got))
		})
	}
}

func TestMemoryCheckpointer(t *testing.T) {
	var m MemoryCheckpointer
	got, err := m.Read()
	require.NoError(t, err)
	assert.Nil(t, got, "nothing written yet")

	require.NoError(t, m.Write(fixtureEntries()))
	fixture, err := os.ReadFile(fixturePath)
	require.NoError(t, err)
	assert.Equal(t, fixture, m.Bytes(), "holds the document exactly as the file would")
	got, err = m.Read()
	require.NoError(t, err)
	assert.Equal(t, viewsOf(fixtureEntries()), viewsOf(got))

	require.NoError(t, m.Write(nil))
	got, err = m.Read()
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, 2, m.Writes())

	m.SetFail(io.ErrShortWrite)
	require.ErrorIs(t, m.Write(fixtureEntries()), io.ErrShortWrite)
	assert.Equal(t, 2, m.Writes())
	got, err = m.Read()
	require.NoError(t, err)
	assert.Empty(t, got, "a failed write keeps the previous document")
}
