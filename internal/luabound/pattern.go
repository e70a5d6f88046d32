package luabound

import "fmt"

// A Lua pattern's worst case, read from its text. Lua matches patterns in C (lstrlib.c's
// match), where Redis's script hook never runs: a match that backtracks over a long subject
// holds its master with no BUSY reply and no SCRIPT KILL. The matcher tries each start of the
// subject (unless the pattern starts with ^), and at a start each repetition (x*, x+, x-), each
// %b and each back reference can be taken at every length up to the subject's and then undone
// when what follows fails. So a pattern with k of them that something able to fail follows
// costs up to n^(k+1) steps on an n-byte subject (n^k when anchored); a repetition that ends
// the pattern (before captures' closing only) never backtracks, since nothing after it fails.

// pattern is what one pattern can cost: up to coef * n^degree steps on an n-byte subject.
type pattern struct {
	degree int
	coef   float64
}

// maxPatternBranches bounds x? items in one pattern: each doubles the ways to match.
const maxPatternBranches = 16

// patternCost reads a Lua 5.1 pattern, for find, match and gsub, or for gmatch, which treats
// ^ as a plain character (so never anchors).
func patternCost(p string, gmatch bool) (pattern, error) {
	i := 0
	anchored := !gmatch && len(p) > 0 && p[0] == '^'
	if anchored {
		i = 1
	}
	var items []bool // for each item: true if it repeats (backtracks when something after it fails)
	optional := 0
	for i < len(p) {
		next, it, err := patternItem(p, i)
		if err != nil {
			return pattern{}, err
		}
		i = next
		switch it {
		case itemNone:
			continue
		case itemOptional:
			if optional++; optional > maxPatternBranches {
				return pattern{}, fmt.Errorf("more than %d optional items", maxPatternBranches)
			}
		}
		items = append(items, it == itemRepeats)
	}
	degree := 0
	for k, repeats := range items {
		if repeats && k < len(items)-1 {
			degree++ // something after it can fail, and it is undone one length at a time
		}
	}
	if !anchored {
		degree++
	}
	degree = max(degree, 1) // a match reads its subject at least once
	coef := float64(len(p)+1) * float64(uint(1)<<optional)
	return pattern{degree: degree, coef: coef}, nil
}

// item is what one of a pattern's items does.
type item int

const (
	itemNone     item = iota // a capture's bracket: matches nothing
	itemOnce                 // matches once, or fails
	itemOptional             // x?: matches or not
	itemRepeats              // x*, x+, x-, %b, a back reference: any length, undone one at a time
)

// patternItem reads the item at p[i]: where the next starts, and what it does.
func patternItem(p string, i int) (int, item, error) {
	c := p[i]
	switch {
	case c == '(' || c == ')':
		return i + 1, itemNone, nil
	case c == '$' && i == len(p)-1:
		return i + 1, itemOnce, nil // the end anchor can fail
	case c == '%' && i+1 < len(p) && p[i+1] == 'b':
		if i+4 > len(p) {
			return 0, 0, fmt.Errorf("a malformed %%b")
		}
		return i + 4, itemRepeats, nil
	case c == '%' && i+1 < len(p) && p[i+1] == 'f':
		end, err := setEnd(p, i+2)
		return end, itemOnce, err
	case c == '%' && i+1 < len(p) && p[i+1] >= '0' && p[i+1] <= '9':
		return i + 2, itemRepeats, nil // a back reference compares up to a capture's length
	}
	end, err := singleEnd(p, i)
	if err != nil {
		return 0, 0, err
	}
	if end < len(p) {
		switch p[end] {
		case '*', '+', '-':
			return end + 1, itemRepeats, nil
		case '?':
			return end + 1, itemOptional, nil
		}
	}
	return end, itemOnce, nil
}

// singleEnd is where the single-character class at p[i] ends: %x, [set], . or a character.
func singleEnd(p string, i int) (int, error) {
	switch p[i] {
	case '%':
		if i+1 >= len(p) {
			return 0, fmt.Errorf("a pattern ends with %%")
		}
		return i + 2, nil
	case '[':
		return setEnd(p, i)
	}
	return i + 1, nil
}

// setEnd is where the set [...] starting at p[i] ends.
func setEnd(p string, i int) (int, error) {
	if i >= len(p) || p[i] != '[' {
		return 0, fmt.Errorf("a malformed set")
	}
	i++
	if i < len(p) && p[i] == '^' {
		i++
	}
	first := true
	for i < len(p) {
		switch {
		case p[i] == '%':
			i += 2
		case p[i] == ']' && !first:
			return i + 1, nil
		default:
			i++
		}
		first = false
	}
	return 0, fmt.Errorf("a set with no ]")
}
