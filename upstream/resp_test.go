package upstream

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

func TestSlot(t *testing.T) {
	// Values from CLUSTER KEYSLOT.
	tests := map[string]uint16{"foo": 12182, "bar": 5061, "{user1000}.following": 3443, "{user1000}.followers": 3443,
		"foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061, "": 0}
	for key, want := range tests {
		if got := Slot([]byte(key)); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestArrayReply(t *testing.T) {
	if got := string(arrayReply([][]byte{[]byte("$1\r\na\r\n"), []byte("$-1\r\n")})); got != "*2\r\n$1\r\na\r\n$-1\r\n" {
		t.Fatalf("arrayReply = %q", got)
	}
}

// TestSlotTable: the table-driven CRC16 gives the bit-by-bit one's slot for every byte value
// and for random keys.
func TestSlotTable(t *testing.T) {
	bitwise := func(key []byte) uint16 {
		var crc uint16
		for _, b := range key {
			crc ^= uint16(b) << 8
			for range 8 {
				if crc&0x8000 != 0 {
					crc = crc<<1 ^ 0x1021
				} else {
					crc <<= 1
				}
			}
		}
		return crc % 16384
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		key := make([]byte, i%40)
		for j := range key {
			key[j] = byte(rng.UintN(256))
		}
		if i < 256 {
			key = []byte{byte(i), 'x'}
		}
		if bytes.IndexByte(key, '{') >= 0 {
			continue
		}
		if got, want := Slot(key), bitwise(key); got != want {
			t.Fatalf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}
