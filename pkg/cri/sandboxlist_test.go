package cri

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/aws/amazon-vpc-cni-k8s/pkg/sim/fakecri"
)

// generatedDecode is the reference: the generated decoder, then the same
// conversion ListSandboxes did before it decoded the wire itself.
func generatedDecode(b []byte) ([]Sandbox, error) {
	var resp runtimeapi.ListPodSandboxResponse
	if err := proto.Unmarshal(b, &resp); err != nil {
		return nil, err
	}
	out := make([]Sandbox, 0, len(resp.Items))
	for _, s := range resp.Items {
		sb := fromSandbox(s.Id, s.Metadata, s.State, s.CreatedAt)
		sb.MultiNIC = isMultiNIC(s.Annotations)
		out = append(out, sb)
	}
	return out, nil
}

// listGenerated is ListSandboxes through the generated client stub, the
// path before sandboxListCodec, kept for comparison in benchmarks.
func (c *Client) listGenerated(ctx context.Context) ([]Sandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, c.failed("ListPodSandbox", err)
	}
	out := make([]Sandbox, 0, len(resp.Items))
	for _, s := range resp.Items {
		sb := fromSandbox(s.Id, s.Metadata, s.State, s.CreatedAt)
		sb.MultiNIC = isMultiNIC(s.Annotations)
		out = append(out, sb)
	}
	return out, nil
}

// kubeletSandbox is a sandbox as containerd lists a kubelet pod's.
func kubeletSandbox(i int, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
	name, uid := fmt.Sprintf("web-%05d", i), fmt.Sprintf("5f0c2a4e-9b1d-4c3e-8a7f-%012d", i)
	return &runtimeapi.PodSandbox{
		Id:       fmt.Sprintf("%064x", i),
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "prod", Uid: uid, Attempt: uint32(i % 3)},
		State:    state,
		// Nanoseconds, as containerd reports them.
		CreatedAt: time.Date(2026, 11, 30, 9, 14, 27, i, time.UTC).UnixNano(),
		Labels: map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "prod",
			"io.kubernetes.pod.uid": uid, "app": "web"},
		Annotations:    map[string]string{"kubernetes.io/config.source": "api", "kubernetes.io/config.seen": "2026-11-30T09:14:27Z"},
		RuntimeHandler: "runc",
	}
}

func marshal(t testing.TB, items ...*runtimeapi.PodSandbox) []byte {
	t.Helper()
	b, err := proto.Marshal(&runtimeapi.ListPodSandboxResponse{Items: items})
	require.NoError(t, err)
	return b
}

// Answers the generated code encodes decode as the generated decoder does.
func TestDecodeSandboxListMatchesGenerated(t *testing.T) {
	cases := map[string][]*runtimeapi.PodSandbox{
		"empty":          nil,
		"one ready":      {kubeletSandbox(1, runtimeapi.PodSandboxState_SANDBOX_READY)},
		"ready and not":  {kubeletSandbox(1, runtimeapi.PodSandboxState_SANDBOX_READY), kubeletSandbox(2, runtimeapi.PodSandboxState_SANDBOX_NOTREADY)},
		"no metadata":    {{Id: "host", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		"only an id":     {{Id: "bare"}},
		"empty item":     {{}},
		"unknown state":  {{Id: "odd", State: runtimeapi.PodSandboxState(7)}},
		"negative time":  {{Id: "old", CreatedAt: -1}},
		"non-ascii name": {{Id: "u", Metadata: &runtimeapi.PodSandboxMetadata{Name: "pöd-ünïcode-名前", Namespace: "ns"}}},
	}
	var many []*runtimeapi.PodSandbox
	for i := range 300 {
		many = append(many, kubeletSandbox(i, runtimeapi.PodSandboxState(i%2)))
	}
	cases["300 sandboxes"] = many
	multi := kubeletSandbox(3, runtimeapi.PodSandboxState_SANDBOX_READY)
	multi.Annotations[MultiNICAnnotation] = MultiNICAttachment
	other := kubeletSandbox(4, runtimeapi.PodSandboxState_SANDBOX_READY)
	other.Annotations[MultiNICAnnotation] = "something-else"
	cases["multi-NIC pod beside others"] = []*runtimeapi.PodSandbox{kubeletSandbox(1, runtimeapi.PodSandboxState_SANDBOX_READY), multi, other}
	for name, items := range cases {
		t.Run(name, func(t *testing.T) {
			b := marshal(t, items...)
			want, err := generatedDecode(b)
			require.NoError(t, err)
			got, err := decodeSandboxList(b, 0)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Len(t, got, len(items))
		})
	}
}

// Wire forms the generated encoder does not produce but another runtime's
// encoder may: repeated fields, unknown fields, unexpected wire types.
func TestDecodeSandboxListWireRules(t *testing.T) {
	item := func(fields ...[]byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), cat(fields...))
	}
	str := func(num protowire.Number, s string) []byte {
		return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
	}
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	meta := func(fields ...[]byte) []byte { return str(2, string(cat(fields...))) }
	annot := func(k, v string) []byte { return str(6, string(cat(str(1, k), str(2, v)))) }
	fixed := protowire.AppendFixed32(protowire.AppendTag(nil, 9, protowire.Fixed32Type), 7)
	group := cat(protowire.AppendTag(nil, 10, protowire.StartGroupType), varint(1, 5), protowire.AppendTag(nil, 10, protowire.EndGroupType))

	ok := map[string][]byte{
		"last id wins":                  item(str(1, "first"), str(1, "second"), varint(3, 1)),
		"metadata merges":               item(str(1, "a"), meta(str(1, "n1"), str(3, "ns")), meta(str(1, "n2"), str(2, "uid"))),
		"unknown fields":                cat(varint(5, 1), item(str(1, "a"), fixed, group, str(99, "x"), varint(3, 1)), fixed),
		"state as bytes is unknown":     item(str(1, "a"), str(3, "READY")),
		"id as varint is unknown":       item(varint(1, 3), str(1, "a")),
		"metadata name as varint":       item(str(1, "a"), meta(varint(1, 3), str(3, "ns"))),
		"64-bit state keeps low 32":     item(str(1, "a"), varint(3, 1<<32|1)),
		"max created_at":                item(str(1, "a"), varint(4, 1<<63-1)),
		"items interleaved with others": cat(item(str(1, "a")), varint(2, 1), item(str(1, "b"))),
		"multi-NIC annotation":          item(str(1, "a"), annot(MultiNICAnnotation, MultiNICAttachment)),
		"last multi-NIC entry wins":     item(str(1, "a"), annot(MultiNICAnnotation, MultiNICAttachment), annot(MultiNICAnnotation, "no")),
		"multi-NIC entry value first":   item(str(1, "a"), str(6, string(cat(str(2, MultiNICAttachment), str(1, MultiNICAnnotation))))),
		"multi-NIC entry unknown field": item(str(1, "a"), str(6, string(cat(str(1, MultiNICAnnotation), varint(3, 1), str(2, MultiNICAttachment))))),
	}
	for name, b := range ok {
		t.Run(name, func(t *testing.T) {
			want, err := generatedDecode(b)
			require.NoError(t, err)
			got, err := decodeSandboxList(b, 0)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}

	full := item(str(1, "a"), meta(str(1, "n"), str(3, "ns")), varint(3, 1))
	bad := map[string][]byte{
		"truncated item":          full[:len(full)-1],
		"truncated tag":           {0x80},
		"field number zero":       {0x00, 0x00},
		"item length past end":    cat(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0x7f, 0x0a}),
		"metadata past item":      item(str(1, "a"), []byte{0x12, 0x05, 0x0a}),
		"invalid UTF-8 id":        item(str(1, "\xff\xfe")),
		"invalid UTF-8 namespace": item(str(1, "a"), meta(str(3, "n\xc3"))),
		"field number too large":  item(str(1, "a"), protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), []byte{0}),
		"unterminated group":      item(str(1, "a"), protowire.AppendTag(nil, 10, protowire.StartGroupType)),
		"annotation past its end": item(str(1, "a"), []byte{0x32, 0x05, 0x0a}),
		"varint too long":         item(str(1, "a"), cat(protowire.AppendTag(nil, 3, protowire.VarintType), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})),
	}
	for name, b := range bad {
		t.Run(name, func(t *testing.T) {
			_, wantErr := generatedDecode(b)
			require.Error(t, wantErr, "the reference must refuse it too")
			_, err := decodeSandboxList(b, 0)
			require.ErrorIs(t, err, errMalformed)
		})
	}

	// A field ipamd never reads is not validated: a label that is not
	// valid UTF-8 does not cost the pass, where the generated decoder
	// would refuse the whole list.
	b := item(str(1, "a"), str(5, string(cat(str(1, "k"), str(2, "\xff")))))
	_, refErr := generatedDecode(b)
	require.Error(t, refErr)
	got, err := decodeSandboxList(b, 0)
	require.NoError(t, err)
	assert.Equal(t, "a", got[0].ID)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Whatever the bytes, the decoder agrees with the generated one: the same
// sandboxes when that succeeds, an error when it fails, except when what
// the generated decoder refuses lies in the labels, annotations or runtime
// handler, which the decoder skips: then the generated decoder must accept
// the same list without them, and agree.
func FuzzDecodeSandboxList(f *testing.F) {
	f.Add(marshal(f, kubeletSandbox(1, runtimeapi.PodSandboxState_SANDBOX_READY), kubeletSandbox(2, 1)))
	f.Add(marshal(f, &runtimeapi.PodSandbox{Id: "x", Metadata: &runtimeapi.PodSandboxMetadata{Name: "n"}}))
	f.Add([]byte{})
	multi := kubeletSandbox(3, runtimeapi.PodSandboxState_SANDBOX_READY)
	multi.Annotations[MultiNICAnnotation] = MultiNICAttachment
	f.Add(marshal(f, multi))
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantErr := generatedDecode(b)
		got, err := decodeSandboxList(b, 0)
		switch {
		case wantErr == nil:
			require.NoError(t, err)
			require.Equal(t, want, got)
		case err == nil:
			stripped, ok := withoutSkippedFields(b)
			require.True(t, ok, "the decoder accepted a list that is not well formed")
			want, wantErr = generatedDecode(stripped)
			require.NoError(t, wantErr, "the generated decoder refuses more than skipped fields")
			require.Equal(t, want, got)
		}
	})
}

// withoutSkippedFields re-encodes a ListPodSandboxResponse without the
// items' labels, annotations and runtime handler (fields 5-7), except the
// multi-NIC annotation, the one the decoder reads.
func withoutSkippedFields(b []byte) ([]byte, bool) {
	var out []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, false
		}
		field := b[:n+m]
		if num == fieldListItems && typ == protowire.BytesType {
			item, _ := protowire.ConsumeBytes(b[n:])
			var kept []byte
			for len(item) > 0 {
				inum, ityp, k := protowire.ConsumeTag(item)
				if k < 0 {
					return nil, false
				}
				l := protowire.ConsumeFieldValue(inum, ityp, item[k:])
				if l < 0 {
					return nil, false
				}
				if inum < 5 || inum > 7 {
					kept = append(kept, item[:k+l]...)
				}
				if inum == fieldSandboxAnnots && ityp == protowire.BytesType {
					// The multi-NIC annotation is read: kept, in the form
					// that says what the decoder made of it.
					v, _ := protowire.ConsumeBytes(item[k:])
					key, value, err := decodeEntry(v)
					if err != nil {
						return nil, false
					}
					if string(key) == MultiNICAnnotation {
						if string(value) != MultiNICAttachment {
							value = nil
						}
						entry := protowire.AppendString(protowire.AppendTag(nil, fieldEntryKey, protowire.BytesType), MultiNICAnnotation)
						entry = protowire.AppendBytes(protowire.AppendTag(entry, fieldEntryValue, protowire.BytesType), value)
						kept = protowire.AppendBytes(protowire.AppendTag(kept, fieldSandboxAnnots, protowire.BytesType), entry)
					}
				}
				item = item[k+l:]
			}
			field = protowire.AppendBytes(protowire.AppendTag(nil, num, typ), kept)
		}
		out = append(out, field...)
		b = b[n+m:]
	}
	return out, true
}

// Over gRPC against the fake runtime, which answers with labels and
// annotations as containerd does, the client lists every field it keeps,
// in every state.
func TestListSandboxesOverGRPC(t *testing.T) {
	dir := sockDir(t)
	rt, path := serve(t, dir, "rt.sock")
	created := time.Date(2026, 11, 30, 9, 0, 0, 123456789, time.UTC)
	rt.Add(fakecri.Sandbox{ID: "ready", Name: "web-1", Namespace: "prod", UID: "u1", State: runtimeapi.PodSandboxState_SANDBOX_READY,
		IP: "10.0.0.5", CreatedAt: created, Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": strings.Repeat("x", 4096)}})
	rt.Add(fakecri.Sandbox{ID: "stopped", Name: "web-2", Namespace: "prod", UID: "u2", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		CreatedAt: created.Add(time.Second)})
	c, err := Dial(path, time.Second, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	got, err := c.ListSandboxes(context.Background())
	require.NoError(t, err)
	want, err := c.listGenerated(context.Background())
	require.NoError(t, err)
	assert.Equal(t, want, got)
	require.Len(t, got, 2)
	assert.Equal(t, Sandbox{ID: "ready", Name: "web-1", Namespace: "prod", UID: "u1", Ready: true, CreatedAt: time.Unix(0, created.UnixNano())}, got[0])
	assert.Equal(t, Sandbox{ID: "stopped", Name: "web-2", Namespace: "prod", UID: "u2", CreatedAt: time.Unix(0, created.Add(time.Second).UnixNano())}, got[1])
}

// BenchmarkListSandboxes is one list of n kubelet sandboxes over gRPC,
// decoded by the generated code (before) and off the wire (now).
func BenchmarkListSandboxes(b *testing.B) {
	for _, n := range []int{1000} {
		dir, err := os.MkdirTemp("", "cri")
		require.NoError(b, err)
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		rt := fakecri.New()
		for i := range n {
			s := kubeletSandbox(i, runtimeapi.PodSandboxState_SANDBOX_READY)
			rt.Add(fakecri.Sandbox{ID: s.Id, Name: s.Metadata.Name, Namespace: s.Metadata.Namespace, UID: s.Metadata.Uid,
				State: s.State, CreatedAt: time.Unix(0, s.CreatedAt), Labels: s.Labels, Annotations: s.Annotations})
		}
		require.NoError(b, rt.Serve(dir+"/rt.sock"))
		b.Cleanup(rt.Stop)
		c, err := Dial(dir+"/rt.sock", 5*time.Second, nil)
		require.NoError(b, err)
		b.Cleanup(func() { _ = c.Close() })
		for _, mode := range []string{"generated", "wire"} {
			list := c.ListSandboxes
			if mode == "generated" {
				list = c.listGenerated
			}
			b.Run(fmt.Sprintf("sandboxes=%d/decode=%s", n, mode), func(b *testing.B) {
				for b.Loop() {
					if out, err := list(context.Background()); err != nil || len(out) != n {
						b.Fatal(len(out), err)
					}
				}
			})
		}
	}
}

// A pod that asked for an interface per network card says so in its
// sandbox's annotations, which both the list and the status carry: the
// runtime reports only its first interface's addresses.
func TestAMultiNICSandboxIsMarkedInListAndStatus(t *testing.T) {
	dir := sockDir(t)
	rt, path := serve(t, dir, "rt.sock")
	rt.Add(fakecri.Sandbox{ID: "multi", Name: "m", Namespace: "prod", State: runtimeapi.PodSandboxState_SANDBOX_READY, IP: "10.0.0.5",
		Annotations: map[string]string{MultiNICAnnotation: MultiNICAttachment, "other": "x"}})
	rt.Add(fakecri.Sandbox{ID: "single", Name: "s", Namespace: "prod", State: runtimeapi.PodSandboxState_SANDBOX_READY, IP: "10.0.0.6",
		Annotations: map[string]string{MultiNICAnnotation: "none"}})
	c, err := Dial(path, time.Second, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	got, err := c.ListSandboxes(context.Background())
	require.NoError(t, err)
	multi := map[string]bool{}
	for _, s := range got {
		multi[s.ID] = s.MultiNIC
	}
	assert.Equal(t, map[string]bool{"multi": true, "single": false}, multi)
	for id, want := range map[string]bool{"multi": true, "single": false} {
		st, err := c.SandboxStatus(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, want, st.MultiNIC, id)
	}
}
