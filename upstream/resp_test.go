package upstream

import "testing"

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
