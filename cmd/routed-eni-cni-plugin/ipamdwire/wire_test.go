package ipamdwire

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/encoding/protowire"
)

// The wire helpers agree with protobuf's own (protowire).
func TestVarintsAgreeWithProtowire(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 300, 1<<35 + 7, math.MaxInt32, math.MaxUint32, 1 << 63, math.MaxUint64,
		uint64(0xffffffffffffffff) &^ 1} {
		b := appendVarint(nil, v)
		assert.Equal(t, protowire.AppendVarint(nil, v), b, "%d", v)
		got, n := consumeVarint(b)
		assert.Equal(t, v, got)
		assert.Equal(t, len(b), n)
	}
	// int32 -1 is sent as a 10-byte varint and read back.
	assert.Equal(t, int32(-1), field{v: func() uint64 { v, _ := consumeVarint(appendVarint(nil, uint64(math.MaxUint64))); return v }()}.int32())
	for _, b := range [][]byte{
		nil, {0x80}, {0xff, 0xff}, // ends inside the varint
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},       // overflows 64 bits
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // 11 bytes
	} {
		_, n := consumeVarint(b)
		_, pn := protowire.ConsumeVarint(b)
		assert.Negative(t, n, "%x", b)
		assert.Negative(t, pn, "%x", b)
	}
	assert.Equal(t, protowire.AppendTag(nil, 13, protowire.BytesType), appendTag(nil, 13, bytesType))
	assert.Equal(t, protowire.AppendTag(nil, maxFieldNumber, protowire.VarintType), appendTag(nil, maxFieldNumber, varintType))
	for _, b := range [][]byte{{0x00}, {0x07}, appendVarint(nil, uint64(maxFieldNumber+1)<<3)} {
		_, _, n := consumeTag(b)
		assert.Negative(t, n, "field number 0 or too large: %x", b)
	}
	_, n := consumeBytes([]byte{0x05, 'a', 'b'})
	assert.Negative(t, n, "longer than what is left")
	v, n := consumeBytes([]byte{0x02, 'a', 'b', 'c'})
	assert.Equal(t, "ab", string(v))
	assert.Equal(t, 3, n)
}

func FuzzConsumeVarint(f *testing.F) {
	f.Add([]byte{0x96, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, n := consumeVarint(b)
		pv, pn := protowire.ConsumeVarint(b)
		if (n < 0) != (pn < 0) || (n >= 0 && (v != pv || n != pn)) {
			t.Fatalf("%x: ours %d/%d, protowire %d/%d", b, v, n, pv, pn)
		}
	})
}
