package cri

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListPodSandbox is decoded here rather than by the generated code: the
// reconciler lists every sandbox on every pass, and the generated decoder
// builds a message, a metadata message, and a labels and an annotations map
// (with every key and value copied) per sandbox, only for ipamd to keep
// four strings, the state and the creation time. This decoder reads those
// fields straight off the wire, skips the rest (labels, every annotation
// but the multi-NIC one, the runtime handler, fields a later CRI adds), and
// copies the kept strings of all sandboxes into one allocation.
//
// It follows the protobuf rules the generated decoder follows for the kept
// fields (last scalar wins, a repeated metadata message merges, a field
// with an unexpected wire type is an unknown field, kept strings must be
// valid UTF-8) and fails on malformed input, so a pass that cannot trust
// the list is skipped. It does not validate fields it skips, which the
// generated decoder would.

// Field numbers of runtime.v1 messages (api.proto, the CRI's wire contract).
const (
	fieldListItems = 1 // ListPodSandboxResponse.items

	fieldSandboxID        = 1 // PodSandbox.id
	fieldSandboxMetadata  = 2 // PodSandbox.metadata
	fieldSandboxState     = 3 // PodSandbox.state
	fieldSandboxCreatedAt = 4 // PodSandbox.created_at
	fieldSandboxAnnots    = 6 // PodSandbox.annotations (map<string, string>)

	fieldEntryKey   = 1 // a map entry's key
	fieldEntryValue = 2 // a map entry's value

	fieldMetaName      = 1 // PodSandboxMetadata.name
	fieldMetaUID       = 2 // PodSandboxMetadata.uid
	fieldMetaNamespace = 3 // PodSandboxMetadata.namespace
)

var (
	errMalformed   = errors.New("malformed ListPodSandboxResponse")
	errInvalidUTF8 = fmt.Errorf("%w: invalid UTF-8 in a sandbox's id or metadata", errMalformed)
)

// sandboxList receives a ListPodSandbox answer through sandboxListCodec;
// hint is how many sandboxes the last list held (a capacity guess).
type sandboxList struct {
	items []Sandbox
	hint  int
}

// span is where a kept string lies in the message.
type span struct{ start, end int }

// wireSandbox is one item as found in the message, before its strings are
// copied out.
type wireSandbox struct {
	id, name, uid, namespace span
	state                    int32
	createdAt                int64
	multiNIC                 bool
}

// decodeSandboxList decodes a serialized ListPodSandboxResponse; hint is
// the number of sandboxes expected.
func decodeSandboxList(b []byte, hint int) ([]Sandbox, error) {
	items := make([]wireSandbox, 0, min(hint, len(b)/2)) // an item takes at least 2 bytes
	for off := 0; off < len(b); {
		num, typ, n, err := consumeTag(b[off:], "list")
		if err != nil {
			return nil, err
		}
		off += n
		if num == fieldListItems && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b[off:])
			if n < 0 {
				return nil, fmt.Errorf("%w: item: %v", errMalformed, protowire.ParseError(n))
			}
			ws, err := decodeSandbox(b, off+n-len(v), off+n)
			if err != nil {
				return nil, err
			}
			items = append(items, ws)
			off += n
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b[off:])
		if n < 0 {
			return nil, fmt.Errorf("%w: field %d: %v", errMalformed, num, protowire.ParseError(n))
		}
		off += n
	}
	return keepStrings(b, items), nil
}

// decodeSandbox decodes the PodSandbox in b[start:end]; its spans index b.
func decodeSandbox(b []byte, start, end int) (wireSandbox, error) {
	var ws wireSandbox
	for off := start; off < end; {
		num, typ, n, err := consumeTag(b[off:end], "sandbox")
		if err != nil {
			return ws, err
		}
		off += n
		switch {
		case num == fieldSandboxID && typ == protowire.BytesType,
			num == fieldSandboxMetadata && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b[off:end])
			if n < 0 {
				return ws, fmt.Errorf("%w: sandbox field %d: %v", errMalformed, num, protowire.ParseError(n))
			}
			s := span{off + n - len(v), off + n}
			if num == fieldSandboxID {
				if !utf8.Valid(v) {
					return ws, errInvalidUTF8
				}
				ws.id = s
			} else if err := decodeMetadata(b, s, &ws); err != nil {
				return ws, err
			}
			off += n
		case num == fieldSandboxAnnots && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b[off:end])
			if n < 0 {
				return ws, fmt.Errorf("%w: sandbox field %d: %v", errMalformed, num, protowire.ParseError(n))
			}
			key, value, err := decodeEntry(v)
			if err != nil {
				return ws, err
			}
			if string(key) == MultiNICAnnotation { // a later entry for a key wins, as in a map
				ws.multiNIC = string(value) == MultiNICAttachment
			}
			off += n
		case num == fieldSandboxState && typ == protowire.VarintType,
			num == fieldSandboxCreatedAt && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b[off:end])
			if n < 0 {
				return ws, fmt.Errorf("%w: sandbox field %d: %v", errMalformed, num, protowire.ParseError(n))
			}
			if num == fieldSandboxState {
				ws.state = int32(v) // an enum is an int32 on the wire
			} else {
				ws.createdAt = int64(v)
			}
			off += n
		default:
			n = protowire.ConsumeFieldValue(num, typ, b[off:end])
			if n < 0 {
				return ws, fmt.Errorf("%w: sandbox field %d: %v", errMalformed, num, protowire.ParseError(n))
			}
			off += n
		}
	}
	return ws, nil
}

// decodeMetadata merges the PodSandboxMetadata in b[s.start:s.end] into ws.
func decodeMetadata(b []byte, s span, ws *wireSandbox) error {
	for off := s.start; off < s.end; {
		num, typ, n, err := consumeTag(b[off:s.end], "metadata")
		if err != nil {
			return err
		}
		off += n
		var dst *span
		if typ == protowire.BytesType {
			switch num {
			case fieldMetaName:
				dst = &ws.name
			case fieldMetaUID:
				dst = &ws.uid
			case fieldMetaNamespace:
				dst = &ws.namespace
			}
		}
		var v []byte
		if dst == nil {
			n = protowire.ConsumeFieldValue(num, typ, b[off:s.end])
		} else {
			v, n = protowire.ConsumeBytes(b[off:s.end])
		}
		if n < 0 {
			return fmt.Errorf("%w: metadata field %d: %v", errMalformed, num, protowire.ParseError(n))
		}
		if dst != nil {
			if !utf8.Valid(v) {
				return errInvalidUTF8
			}
			*dst = span{off + n - len(v), off + n}
		}
		off += n
	}
	return nil
}

// decodeEntry decodes one map<string, string> entry (a missing key or
// value is empty; the last of a repeated field wins). Key and value alias
// b: nothing is copied for the annotations ipamd does not read.
func decodeEntry(b []byte) (key, value []byte, err error) {
	for off := 0; off < len(b); {
		num, typ, n, err := consumeTag(b[off:], "annotation")
		if err != nil {
			return nil, nil, err
		}
		off += n
		if (num == fieldEntryKey || num == fieldEntryValue) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b[off:])
			if n < 0 {
				return nil, nil, fmt.Errorf("%w: annotation field %d: %v", errMalformed, num, protowire.ParseError(n))
			}
			if num == fieldEntryKey {
				key = v
			} else {
				value = v
			}
			off += n
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b[off:])
		if n < 0 {
			return nil, nil, fmt.Errorf("%w: annotation field %d: %v", errMalformed, num, protowire.ParseError(n))
		}
		off += n
	}
	return key, value, nil
}

// consumeTag is protowire.ConsumeTag that also refuses field numbers above
// the protobuf maximum, as the generated decoder does. what names the
// message for the error.
func consumeTag(b []byte, what string) (protowire.Number, protowire.Type, int, error) {
	num, typ, n := protowire.ConsumeTag(b)
	switch {
	case n < 0:
		return 0, 0, n, fmt.Errorf("%w: %s: %v", errMalformed, what, protowire.ParseError(n))
	case num > protowire.MaxValidNumber:
		return 0, 0, -1, fmt.Errorf("%w: %s: field number %d out of range", errMalformed, what, num)
	}
	return num, typ, n, nil
}

// keepStrings copies the kept strings of every item into one string and
// returns the sandboxes, whose strings share it.
func keepStrings(b []byte, items []wireSandbox) []Sandbox {
	total := 0
	for _, ws := range items {
		for _, s := range [...]span{ws.id, ws.name, ws.uid, ws.namespace} {
			total += s.end - s.start
		}
	}
	var sb strings.Builder
	sb.Grow(total)
	for _, ws := range items {
		for _, s := range [...]span{ws.id, ws.name, ws.uid, ws.namespace} {
			sb.Write(b[s.start:s.end])
		}
	}
	all := sb.String()
	out := make([]Sandbox, len(items))
	pos := 0
	cut := func(s span) string {
		v := all[pos : pos+s.end-s.start]
		pos += s.end - s.start
		return v
	}
	for i, ws := range items {
		out[i] = Sandbox{ID: cut(ws.id), Name: cut(ws.name), UID: cut(ws.uid), Namespace: cut(ws.namespace),
			Ready:     ws.state == int32(runtimeapi.PodSandboxState_SANDBOX_READY),
			CreatedAt: time.Unix(0, ws.createdAt), MultiNIC: ws.multiNIC}
	}
	return out
}

// sandboxListCodec is the codec of the ListPodSandbox call: the request is
// an ordinary protobuf message, the answer goes to decodeSandboxList. Its
// name is empty so gRPC sends no content subtype: the runtime sees exactly
// application/grpc, as from its own generated clients. A name (even
// "proto", giving application/grpc+proto) gets the connection reset by
// CRI-O, which tells gRPC from HTTP on its one socket by that header.
type sandboxListCodec struct{}

func (sandboxListCodec) Name() string { return "" }

func (sandboxListCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("cri: cannot encode %T", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (sandboxListCodec) Unmarshal(data mem.BufferSlice, v any) error {
	out, ok := v.(*sandboxList)
	if !ok {
		return fmt.Errorf("cri: cannot decode into %T", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	items, err := decodeSandboxList(buf.ReadOnlyData(), out.hint)
	out.items = items
	return err
}
