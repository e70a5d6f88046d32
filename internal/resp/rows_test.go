package resp

import (
	"errors"
	"slices"
	"strconv"
	"testing"
)

// field is sale.Field, which the buy path used on Decode's reply before DecodeRows.
func field(reply []any, i int) string {
	switch v := reply[i].(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// viaDecode is what DecodeRows must give: Decode, then Field on each element of each row.
func viaDecode(raw []byte) ([][]string, error) {
	v, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	top, ok := v.([]any)
	if !ok {
		return nil, ErrReply
	}
	rows := make([][]string, len(top))
	for i, r := range top {
		row, ok := r.([]any)
		if !ok {
			continue
		}
		rows[i] = make([]string, len(row))
		for j := range row {
			rows[i][j] = field(row, j)
		}
	}
	return rows, nil
}

func sameRows(a, b [][]string) bool {
	return slices.EqualFunc(a, b, func(x, y []string) bool { return (x == nil) == (y == nil) && slices.Equal(x, y) })
}

var rowSeeds = []string{
	"*2\r\n*6\r\n$2\r\nOK\r\n$20\r\nd4ke8ogfch9s73b0m5pg\r\n:1\r\n:99\r\n$15\r\n1764600000000-0\r\n:1764600000000\r\n*2\r\n$9\r\nDUPLICATE\r\n$3\r\nabc\r\n",
	"*1\r\n*2\r\n+SOLDOUT\r\n:0\r\n",
	"-NOSCRIPT No matching script\r\n",
	"*3\r\n:5\r\n$-1\r\n*-1\r\n",
	"*1\r\n*3\r\n-ERR inside\r\n*1\r\n:1\r\n$-1\r\n",
	"*-1\r\n",
	"+OK\r\n",
	"*1\r\n*1\r\n:007\r\n",
	"*2\r\n*1\r\n",
	"*1\r\n*1\r\n$5\r\nab\r\n",
}

func TestDecodeRows(t *testing.T) {
	for _, s := range rowSeeds {
		got, err := DecodeRows([]byte(s))
		want, werr := viaDecode([]byte(s))
		if (err == nil) != (werr == nil) || !sameRows(got, want) {
			t.Errorf("DecodeRows(%q) = %q, %v; Decode gives %q, %v", s, got, err, want, werr)
		}
		var re ReplyError
		if errors.As(werr, &re) && err.Error() != werr.Error() {
			t.Errorf("DecodeRows(%q): error %q, want %q", s, err, werr)
		}
	}
	rows, _ := DecodeRows([]byte(rowSeeds[0]))
	if len(rows) != 2 || rows[0][0] != "OK" || rows[0][3] != "99" || rows[1][1] != "abc" {
		t.Fatalf("the buy reply: %q", rows)
	}
}

// BenchmarkDecodeRows against Decode on a call of 16 sold buys.
func BenchmarkDecodeRows(b *testing.B) {
	row := "*6\r\n$2\r\nOK\r\n$20\r\nd4ke8ogfch9s73b0m5pg\r\n:1\r\n:99\r\n$15\r\n1764600000000-0\r\n:1764600000000\r\n"
	raw := []byte("*16\r\n")
	for range 16 {
		raw = append(raw, row...)
	}
	b.Run("rows", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeRows(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := viaDecode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzDecodeRows: on any bytes, DecodeRows gives what Decode and Field give, or both fail.
func FuzzDecodeRows(f *testing.F) {
	for _, s := range rowSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := DecodeRows(raw)
		want, werr := viaDecode(raw)
		if (err == nil) != (werr == nil) || !sameRows(got, want) {
			t.Fatalf("DecodeRows(%q) = %q, %v; Decode gives %q, %v", raw, got, err, want, werr)
		}
	})
}
