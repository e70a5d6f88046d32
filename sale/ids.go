package sale

// MaxIDLen is the longest sku or uid.
const MaxIDLen = 64

// MaxLimit is the highest per-user limit a sale may have.
const MaxLimit = 10000

// ValidID reports whether s can be a sku or uid: 1-64 characters of [A-Za-z0-9_.:-].
func ValidID(s []byte) bool {
	if len(s) == 0 || len(s) > MaxIDLen {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// ParseCount parses a positive decimal integer of at most 18 digits, with no sign, spaces
// or leading zeros.
func ParseCount(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 || b[0] == '0' {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
