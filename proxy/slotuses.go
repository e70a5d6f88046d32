package proxy

// slotUses is a client's slot barrier: for each slot with commands in flight, the node they
// went to and how many. A client has a few slots in flight at a time (one per command of a
// pipeline at most), so they are kept in a short slice, searched in order, and only a client
// with more than slotUsesFew of them moves to a map: no map operation per command in the
// common case, and linear time for a hostile pipeline over thousands of slots.
type slotUses struct {
	few  []slotUse
	many map[uint16]slotUse
}

const slotUsesFew = 16

type slotUse struct {
	slot uint16
	addr string
	n    int
}

func (s *slotUses) len() int { return len(s.few) + len(s.many) }

// get returns the use of slot, if it has commands in flight.
func (s *slotUses) get(slot uint16) (slotUse, bool) {
	if s.many != nil {
		u, ok := s.many[slot]
		return u, ok
	}
	for _, u := range s.few {
		if u.slot == slot {
			return u, true
		}
	}
	return slotUse{}, false
}

// add counts one command more of slot, sent to addr.
func (s *slotUses) add(slot uint16, addr string) {
	if s.many != nil {
		u := s.many[slot]
		s.many[slot] = slotUse{slot: slot, addr: addr, n: u.n + 1}
		return
	}
	for i := range s.few {
		if s.few[i].slot == slot {
			s.few[i].addr = addr
			s.few[i].n++
			return
		}
	}
	if len(s.few) < slotUsesFew {
		s.few = append(s.few, slotUse{slot: slot, addr: addr, n: 1})
		return
	}
	s.many = make(map[uint16]slotUse, 2*slotUsesFew)
	for _, u := range s.few {
		s.many[u.slot] = u
	}
	s.few = s.few[:0]
	s.many[slot] = slotUse{slot: slot, addr: addr, n: 1}
}

// done counts one command of slot answered, and reports whether the slot has none left.
func (s *slotUses) done(slot uint16) bool {
	if s.many != nil {
		u := s.many[slot]
		if u.n > 1 {
			u.n--
			s.many[slot] = u
			return false
		}
		delete(s.many, slot)
		if len(s.many) == 0 {
			s.many = nil
		}
		return true
	}
	for i := range s.few {
		if s.few[i].slot != slot {
			continue
		}
		if s.few[i].n > 1 {
			s.few[i].n--
			return false
		}
		last := len(s.few) - 1
		s.few[i] = s.few[last]
		s.few = s.few[:last]
		return true
	}
	return true
}
