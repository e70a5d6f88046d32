package chaos

import "testing"

// TestFaultOf: each kind does something (a link disabled or a toxic), toxic names are unique
// within a kind, and an unknown kind is refused with the list.
func TestFaultOf(t *testing.T) {
	for _, kind := range NetworkFaults() {
		f, err := FaultOf(kind)
		if err != nil || (!f.Disable && len(f.Toxics) == 0) {
			t.Errorf("%s: %+v, %v", kind, f, err)
		}
		seen := map[string]bool{}
		for _, x := range f.Toxics {
			if seen[x.Name] || x.Type == "" || (x.Stream != "upstream" && x.Stream != "downstream") {
				t.Errorf("%s: toxic %+v", kind, x)
			}
			seen[x.Name] = true
		}
	}
	if f, _ := FaultOf("reset"); f.Toxics[0].Toxicity != 0 || f.Toxics[1].Toxicity != 1 {
		t.Errorf("reset's toxicities: %+v (reset_peer must change no data)", f.Toxics)
	}
	if _, err := FaultOf("melt"); err == nil {
		t.Error("an unknown kind was accepted")
	}
}
