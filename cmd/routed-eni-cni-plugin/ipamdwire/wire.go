package ipamdwire

// The protobuf wire format (protobuf.dev/programming-guides/encoding) as
// far as these messages need it. Written here rather than taken from
// protowire, whose package pulls in the protobuf runtime's
// initialisation (it hashes the executable at start-up).

// wireType is the low three bits of a field's tag.
type wireType uint8

const (
	varintType  wireType = 0
	fixed64Type wireType = 1
	bytesType   wireType = 2
	fixed32Type wireType = 5
)

// maxFieldNumber is the largest field number protobuf allows.
const maxFieldNumber = 1<<29 - 1

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendTag(b []byte, num int, t wireType) []byte {
	return appendVarint(b, uint64(num)<<3|uint64(t))
}

func appendBytes(b []byte, v []byte) []byte {
	return append(appendVarint(b, uint64(len(v))), v...)
}

// consumeVarint decodes a varint at the start of b and says how many
// bytes it took, or -1 when b ends inside it or it overflows 64 bits.
func consumeVarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		if i == 9 && c > 1 {
			return 0, -1
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, -1
}

// consumeTag decodes a field's tag: its number (1 to maxFieldNumber) and
// wire type.
func consumeTag(b []byte) (int, wireType, int) {
	v, n := consumeVarint(b)
	if n < 0 || v>>3 < 1 || v>>3 > maxFieldNumber {
		return 0, 0, -1
	}
	return int(v >> 3), wireType(v & 7), n
}

// consumeBytes decodes a length-delimited value.
func consumeBytes(b []byte) ([]byte, int) {
	l, n := consumeVarint(b)
	if n < 0 || l > uint64(len(b)-n) {
		return nil, -1
	}
	return b[n : n+int(l)], n + int(l)
}
