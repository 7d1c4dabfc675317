package datastore

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzDecodeCheckpoint: decoding never panics, fails only with one of the two
// checkpoint errors, and what it accepts survives our encoder unchanged.
func FuzzDecodeCheckpoint(f *testing.F) {
	fixture, err := os.ReadFile(fixturePath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fixture)
	f.Add(EncodeCheckpoint(nil, nil))
	f.Add(EncodeCheckpoint(nil, []CheckpointEntry{
		{Key: IPAMKey{NetworkName: "a\"\\\x00", ContainerID: "日本\xff", IfName: "<&>"}, IP: netip.MustParseAddr("2001:db8::1"),
			AssignedAt: time.Unix(0, -1), Metadata: IPAMMetadata{K8SPodNamespace: "\u2028", InterfacesCount: -7}},
	}))
	for _, s := range []string{
		"",
		"{}",
		"null",
		"[]",
		`{"version":"vpc-cni-ipam/2","allocations":[]}`,
		string(fixture[:len(fixture)/2]),
		`{"version":"vpc-cni-ipam/1","allocations":[{"ipv4":"10.0.0.300"}]}`,
		`{"version":"vpc-cni-ipam/1","allocations":[{"ipv6":"10.0.0.1","allocationTimestamp":-9223372036854775808}]}`,
		`{"VERSION":"vpc-cni-ipam/1","Allocations":[{"IPV4":"1.2.3.4","networkname":"\ud800"}]}`,
		// A zone is not part of a pod address; upstream's parser refuses it.
		`{"version":"vpc-cni-ipam/1","allocations":[{"ipv6":"fe80::1%a\"b"}]}`,
		`{"version":"vpc-cni-ipam/1","allocations":[{"ipv6":"fe80::1%eth0\u0001"}]}`,
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := DecodeCheckpoint(data)
		if err != nil {
			if !errors.Is(err, ErrCheckpointCorrupt) && !errors.Is(err, ErrCheckpointVersion) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			if entries != nil {
				t.Fatalf("entries returned with an error: %v", entries)
			}
			return
		}
		enc := EncodeCheckpoint(nil, entries)
		if !json.Valid(enc) {
			t.Fatalf("re-encoding gives invalid JSON:\n%q\nfrom:\n%q", enc, data)
		}
		again, err := DecodeCheckpoint(enc)
		if err != nil {
			t.Fatalf("re-encoded document does not decode: %v\n%q", err, enc)
		}
		if len(again) != len(entries) {
			t.Fatalf("%d entries became %d", len(entries), len(again))
		}
		for i := range entries {
			a, b := entries[i], again[i]
			if a.Key != b.Key || a.IP != b.IP || a.AssignedAt.UnixNano() != b.AssignedAt.UnixNano() || a.Metadata != b.Metadata {
				t.Fatalf("entry %d changed:\n%+v\n%+v", i, a, b)
			}
		}
		// A second round is a fixed point, byte for byte.
		if enc2 := EncodeCheckpoint(nil, again); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%q\n%q", enc, enc2)
		}
	})
}

// FuzzEncodeStrings: any strings in the key and metadata give valid JSON that
// reads back as the same strings (invalid UTF-8 as U+FFFD per bad byte, the
// way encoding/json writes it), both by us and by an upstream-only reader.
func FuzzEncodeStrings(f *testing.F) {
	f.Add("aws-cni", "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb", "eth0", "kube-system", "coredns-5b9dfbf96-8xk2p", 0)
	f.Add(`"`, `\`, "\x00\x1f\x7f", "\n\r\t\b\f", "<script>&", 2)
	f.Add("\xff", "a\xc3", "\xed\xa0\x80", "\xe2\x82", "\ufffd\u2028\u2029", -1)
	f.Add("日本語", "🚀", "ñ", "", "", 1<<31)
	f.Add(`\u0041`, `\"`, "}\"]", "{", ",", 7)

	f.Fuzz(func(t *testing.T, network, container, ifName, namespace, name string, count int) {
		e := CheckpointEntry{
			Key:        IPAMKey{NetworkName: network, ContainerID: container, IfName: ifName},
			IP:         netip.MustParseAddr("10.0.0.1"),
			AssignedAt: time.Unix(0, 1_700_000_000_123_456_789),
			Metadata:   IPAMMetadata{K8SPodNamespace: namespace, K8SPodName: name, InterfacesCount: count},
		}
		enc := EncodeCheckpoint(nil, []CheckpointEntry{e})
		if !json.Valid(enc) {
			t.Fatalf("invalid JSON: %q", enc)
		}
		got, err := DecodeCheckpoint(enc)
		if err != nil || len(got) != 1 {
			t.Fatalf("decode: %v (%d entries)\n%q", err, len(got), enc)
		}
		up, err := upstreamStrictDecode(enc)
		if err != nil || len(up.Allocations) != 1 {
			t.Fatalf("upstream decode: %v\n%q", err, enc)
		}
		u := up.Allocations[0]
		fields := []struct {
			in, ours, theirs string
		}{
			{network, got[0].Key.NetworkName, u.NetworkName},
			{container, got[0].Key.ContainerID, u.ContainerID},
			{ifName, got[0].Key.IfName, u.IfName},
			{namespace, got[0].Metadata.K8SPodNamespace, u.Metadata.K8SPodNamespace},
			{name, got[0].Metadata.K8SPodName, u.Metadata.K8SPodName},
		}
		for _, fl := range fields {
			want := asDecoded(fl.in)
			if utf8.ValidString(fl.in) && want != fl.in {
				t.Fatalf("asDecoded changed valid %q", fl.in)
			}
			if fl.ours != want || fl.theirs != want {
				t.Fatalf("%q read back as %q (ours) / %q (upstream), want %q", fl.in, fl.ours, fl.theirs, want)
			}
			// Same meaning as encoding/json's own encoding of the string.
			ref, err := json.Marshal(fl.in)
			if err != nil {
				t.Fatal(err)
			}
			var s string
			if err := json.Unmarshal(ref, &s); err != nil || s != want {
				t.Fatalf("encoding/json reads %q back as %q, we as %q", fl.in, s, want)
			}
		}
		if got[0].Metadata.InterfacesCount != count || u.Metadata.InterfacesCount != count {
			t.Fatalf("interfacesCount %d read back as %d / %d", count, got[0].Metadata.InterfacesCount, u.Metadata.InterfacesCount)
		}
	})
}
