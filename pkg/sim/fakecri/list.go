package fakecri

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListPodSandbox is served from encodings cached per sandbox, and the
// unfiltered list from a cached whole. The answer is
// the same message server.ListPodSandbox builds (labels and annotations
// included, as containerd sends them), but encoding a thousand sandboxes'
// label maps anew on every call cost the fake several milliseconds, which a
// benchmark of the client would have counted as the client's. Each
// sandbox is encoded once, by the generated code, and again only after it
// changes; a list is those encodings concatenated, and the unfiltered list
// is kept until any sandbox changes.

// encodedList is a serialized ListPodSandboxResponse.
type encodedList []byte

// serverCodec sends encodedList as is and everything else as protobuf.
type serverCodec struct{}

func (serverCodec) Name() string { return "proto" }

func (serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case encodedList:
		return mem.BufferSlice{mem.SliceBuffer(m)}, nil
	case proto.Message:
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return nil, fmt.Errorf("fakecri: cannot encode %T", v)
}

func (serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("fakecri: cannot decode into %T", v)
	}
	return proto.Unmarshal(data.Materialize(), m)
}

// serviceDesc is the generated RuntimeService with ListPodSandbox routed
// to listHandler.
func serviceDesc() *grpc.ServiceDesc {
	desc := runtimeapi.RuntimeService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	for i := range desc.Methods {
		if desc.Methods[i].MethodName == "ListPodSandbox" {
			desc.Methods[i].Handler = listHandler
		}
	}
	return &desc
}

// listHandler is the generated handler's shape, answering encodedList.
func listHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	req := new(runtimeapi.ListPodSandboxRequest)
	if err := dec(req); err != nil {
		return nil, err
	}
	r := srv.(*server).r
	handler := func(_ context.Context, req any) (any, error) {
		if r.emptyList() {
			return encodedList(nil), nil
		}
		return r.encodedList(req.(*runtimeapi.ListPodSandboxRequest).GetFilter())
	}
	if interceptor == nil {
		return handler(ctx, req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: runtimeapi.RuntimeService_ListPodSandbox_FullMethodName}
	return interceptor(ctx, req, info, handler)
}

// encodedList encodes the visible sandboxes that pass filter, in the order
// Sandboxes uses.
func (r *Runtime) encodedList(filter *runtimeapi.PodSandboxFilter) (encodedList, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if filter == nil && r.all != nil {
		return r.all, nil
	}
	if r.order == nil {
		r.order = make([]*Sandbox, 0, len(r.sandboxes))
		for _, sb := range r.sandboxes {
			r.order = append(r.order, sb)
		}
		slices.SortFunc(r.order, func(a, b *Sandbox) int { return compareSandboxes(*a, *b) })
	}
	listed := make([][]byte, 0, len(r.order))
	size := 0
	for _, sb := range r.order {
		if sb.Hidden || r.omitted[sb.ID] || !matches(*sb, filter) {
			continue
		}
		enc, ok := r.encoded[sb.ID]
		if !ok {
			var err error
			if enc, err = proto.Marshal(toPodSandbox(*sb)); err != nil {
				return nil, fmt.Errorf("fakecri: encode sandbox %s: %w", sb.ID, err)
			}
			r.encoded[sb.ID] = enc
		}
		listed = append(listed, enc)
		size += protowire.SizeTag(1) + protowire.SizeBytes(len(enc))
	}
	out := make([]byte, 0, size)
	for _, enc := range listed {
		out = protowire.AppendTag(out, 1, protowire.BytesType) // ListPodSandboxResponse.items
		out = protowire.AppendBytes(out, enc)
	}
	if filter == nil {
		r.all = out // gRPC only reads it
	}
	return out, nil
}

// changedLocked forgets what was cached about sandbox id; reordered says
// the set of sandboxes changed. Requires r.mu.
func (r *Runtime) changedLocked(id string, reordered bool) {
	delete(r.encoded, id)
	r.all = nil
	if reordered {
		r.order = nil
	}
}
