package datastore

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"time"
	"unicode/utf8"
)

// The on-disk document, as upstream defines it:
//
//	{"version":"vpc-cni-ipam/1","allocations":[{"networkName":..,"containerID":..,
//	 "ifName":..,"ipv4":..,"ipv6":..,"allocationTimestamp":<unix ns>,"metadata":{..}}]}
//
// Encoding is hand-rolled because it runs on every ADD and DEL (a 735-entry
// document with encoding/json costs several hundred microseconds); decoding
// uses encoding/json since it runs once at start.

type fileDoc struct {
	Version     string      `json:"version"`
	Allocations []fileEntry `json:"allocations"`
}

type fileEntry struct {
	IPAMKey
	IPv4                string       `json:"ipv4,omitempty"`
	IPv6                string       `json:"ipv6,omitempty"`
	AllocationTimestamp int64        `json:"allocationTimestamp"`
	Metadata            IPAMMetadata `json:"metadata"`
}

// EncodeCheckpoint appends the JSON document for entries to dst.
func EncodeCheckpoint(dst []byte, entries []CheckpointEntry) []byte {
	dst = append(dst, `{"version":"`+CheckpointVersion+`","allocations":[`...)
	for i := range entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		if enc := entries[i].Encoded; enc != nil {
			dst = append(dst, enc...)
		} else {
			dst = appendEntry(dst, &entries[i])
		}
	}
	return append(dst, "]}\n"...)
}

// appendEntry appends one allocation object.
func appendEntry(dst []byte, e *CheckpointEntry) []byte {
	dst = append(dst, `{"networkName":`...)
	dst = appendJSONString(dst, e.Key.NetworkName)
	dst = append(dst, `,"containerID":`...)
	dst = appendJSONString(dst, e.Key.ContainerID)
	dst = append(dst, `,"ifName":`...)
	dst = appendJSONString(dst, e.Key.IfName)
	if e.IP.Is4() {
		dst = append(dst, `,"ipv4":"`...)
	} else {
		dst = append(dst, `,"ipv6":"`...)
	}
	dst = e.IP.AppendTo(dst)
	dst = append(dst, `","allocationTimestamp":`...)
	dst = strconv.AppendInt(dst, e.AssignedAt.UnixNano(), 10)
	dst = append(dst, `,"metadata":{`...)
	sep := false
	field := func(name string) {
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, `":`...)
	}
	if m := e.Metadata; m.K8SPodNamespace != "" {
		field("k8sPodNamespace")
		dst = appendJSONString(dst, m.K8SPodNamespace)
	}
	if m := e.Metadata; m.K8SPodName != "" {
		field("k8sPodName")
		dst = appendJSONString(dst, m.K8SPodName)
	}
	if m := e.Metadata; m.InterfacesCount != 0 {
		field("interfacesCount")
		dst = strconv.AppendInt(dst, int64(m.InterfacesCount), 10)
	}
	return append(dst, "}}"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does, so the output always decodes.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// DecodeCheckpoint parses a checkpoint document. A document that does not
// parse is ErrCheckpointCorrupt; one with another version is
// ErrCheckpointVersion.
func DecodeCheckpoint(data []byte) ([]CheckpointEntry, error) {
	var doc fileDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCheckpointCorrupt, err)
	}
	if doc.Version != CheckpointVersion {
		return nil, fmt.Errorf("%w: %q (want %q)", ErrCheckpointVersion, doc.Version, CheckpointVersion)
	}
	out := make([]CheckpointEntry, 0, len(doc.Allocations))
	for i, fe := range doc.Allocations {
		text := fe.IPv4
		if text == "" {
			text = fe.IPv6
		}
		ip, err := netip.ParseAddr(text)
		// A pod address never has a zone, and EncodeCheckpoint writes the
		// address unescaped: a zone like `a"b` would make the file unreadable.
		if err != nil || ip.Zone() != "" {
			return nil, fmt.Errorf("%w: allocation %d: bad address %q", ErrCheckpointCorrupt, i, text)
		}
		out = append(out, CheckpointEntry{
			Key:        fe.IPAMKey,
			IP:         ip,
			AssignedAt: time.Unix(0, fe.AllocationTimestamp),
			Metadata:   fe.Metadata,
		})
	}
	return out, nil
}
