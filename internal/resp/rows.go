package resp

import "strconv"

// DecodeRows decodes a reply that is an array of arrays of scalars, as the buy script's reply
// to a call of many buys is, into each row's fields as strings: what Decode, then
// sale.Field on each element, would give (a simple or bulk string as itself, an integer in
// decimal, a null or anything else as ""), with a row that is not an array as nil. Every field
// is a substring of one copy of raw, so that a call costs a few allocations rather than
// several per field. An error reply is returned as the error (a ReplyError), as Decode does;
// an error inside a row is a field of "", as Field reads Decode's ReplyError. A reply that is
// not an array (a null one included), or not well formed, is ErrReply.
func DecodeRows(raw []byte) ([][]string, error) {
	if len(raw) > 0 && raw[0] == '-' {
		_, err := Decode(raw)
		return nil, err
	}
	i := indexCRLF(raw)
	if i < 2 || raw[0] != '*' {
		return nil, ErrReply
	}
	n, ok := parseInt(raw[1:i])
	if !ok || n < 0 || n > int64(len(raw)) { // a null array is not rows either
		return nil, ErrReply
	}
	d := rowDecoder{raw: raw, s: string(raw)}
	pos := i + 2
	spans := make([][2]int, n) // each row's fields in d.fields, or {-1, -1} for nil
	for r := range spans {
		start := len(d.fields)
		isRow, next, err := d.row(pos)
		if err != nil {
			return nil, err
		}
		spans[r], pos = [2]int{start, len(d.fields)}, next
		if !isRow {
			spans[r] = [2]int{-1, -1}
		}
	}
	if pos != len(raw) {
		return nil, ErrReply
	}
	rows := make([][]string, n)
	for r, sp := range spans {
		switch {
		case sp[0] < 0:
		case sp[0] == sp[1]:
			rows[r] = []string{} // an empty row, not a missing one
		default:
			rows[r] = d.fields[sp[0]:sp[1]:sp[1]]
		}
	}
	return rows, nil
}

// rowDecoder reads raw, whose copy s the fields are cut from.
type rowDecoder struct {
	raw    []byte
	s      string
	fields []string // every row's fields, one after another
}

// row reads the reply at raw[pos:]: an array, whose scalars it appends to d.fields as
// strings, or anything else, skipped whole (isRow false); and where the next reply starts.
func (d *rowDecoder) row(pos int) (isRow bool, next int, err error) {
	raw := d.raw
	if pos >= len(raw) {
		return false, 0, ErrReply
	}
	if raw[pos] != '*' {
		_, next, err := d.scalar(pos)
		return false, next, err
	}
	i := pos + indexCRLF(raw[pos:])
	if i <= pos {
		return false, 0, ErrReply
	}
	n, ok := parseInt(raw[pos+1 : i])
	if !ok || n < -1 || n > int64(len(raw)-i) {
		return false, 0, ErrReply
	}
	pos = i + 2
	if n == -1 { // a null array: Decode's nil, not a row
		return false, pos, nil
	}
	for range n {
		if pos >= len(raw) {
			return false, 0, ErrReply
		}
		if raw[pos] == '*' { // a nested array: "", as Field reads it; checked as Decode would
			_, rest, err := decodeOne(raw[pos:])
			if err != nil {
				return false, 0, err
			}
			d.fields, pos = append(d.fields, ""), len(raw)-len(rest)
			continue
		}
		v, next, err := d.scalar(pos)
		if err != nil {
			return false, 0, err
		}
		d.fields, pos = append(d.fields, v), next
	}
	return true, pos, nil
}

// scalar reads the simple string, error, integer or bulk string at s[pos:] as Field would
// give it (an error and a null as ""), and where the next reply starts.
func (d *rowDecoder) scalar(pos int) (string, int, error) {
	raw, s := d.raw, d.s
	i := pos + indexCRLF(raw[pos:])
	if i < pos+1 {
		return "", 0, ErrReply
	}
	line, next := s[pos+1:i], i+2
	switch s[pos] {
	case '+':
		return line, next, nil
	case '-':
		return "", next, nil
	case ':':
		v, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return "", 0, ErrReply
		}
		if !canonicalInt(line) {
			return strconv.FormatInt(v, 10), next, nil
		}
		return line, next, nil
	case '$':
		n, ok := parseInt(raw[pos+1 : i])
		switch {
		case !ok || n < -1 || (n >= 0 && int64(len(s)-next) < n+2):
			return "", 0, ErrReply
		case n == -1:
			return "", next, nil
		case raw[next+int(n)] != '\r' || raw[next+int(n)+1] != '\n':
			return "", 0, ErrReply
		}
		return s[next : next+int(n)], next + int(n) + 2, nil
	}
	return "", 0, ErrReply
}

// canonicalInt: line, which strconv.ParseInt read, is as strconv.FormatInt writes its value
// (no sign but a minus, no leading zero, no "-0"), as Redis writes integers.
func canonicalInt(line string) bool {
	d := line
	if d != "" && d[0] == '-' {
		d = d[1:]
	}
	return d != "" && d[0] != '+' && (d[0] != '0' || line == "0")
}
