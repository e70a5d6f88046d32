// Package chaos holds the fault suite's network faults (scripts/chaos.sh), put on the links
// between the proxies, the sinks and the services through toxiproxy, with toxiproxy's own Go
// client.
package chaos

import (
	"fmt"
	"slices"
	"strings"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

// Toxic is one toxic of a network fault.
type Toxic struct {
	Name, Type, Stream string
	Toxicity           float32
	Attributes         toxiproxy.Attributes
}

// NetworkFault is what a kind of network fault does to a link: disable it, or add its toxics.
type NetworkFault struct {
	Disable bool
	Toxics  []Toxic
}

// networkFaults are the kinds of network fault, by name.
var networkFaults = map[string]NetworkFault{
	// cut: the link refuses connections and drops those open.
	"cut": {Disable: true},
	// slow: 200 ms more on every reply.
	"slow": {Toxics: []Toxic{{Name: "slow", Type: "latency", Stream: "downstream", Toxicity: 1, Attributes: toxiproxy.Attributes{"latency": 200}}}},
	// hang: connections stay open and nothing passes, either way.
	"hang": {Toxics: []Toxic{
		{Name: "hang_down", Type: "timeout", Stream: "downstream", Toxicity: 1, Attributes: toxiproxy.Attributes{"timeout": 0}},
		{Name: "hang_up", Type: "timeout", Stream: "upstream", Toxicity: 1, Attributes: toxiproxy.Attributes{"timeout": 0}}}},
	// stall: what is sent to the service stops, replies still come.
	"stall": {Toxics: []Toxic{{Name: "stall", Type: "bandwidth", Stream: "upstream", Toxicity: 1, Attributes: toxiproxy.Attributes{"rate": 0}}}},
	// reset: a connection is closed with a TCP reset after 4 KB of replies. reset_peer at
	// toxicity 0 changes no data; it makes toxiproxy close with a reset rather than a FIN.
	"reset": {Toxics: []Toxic{
		{Name: "rst", Type: "reset_peer", Stream: "downstream", Toxicity: 0, Attributes: toxiproxy.Attributes{"timeout": 0}},
		{Name: "reset", Type: "limit_data", Stream: "downstream", Toxicity: 1, Attributes: toxiproxy.Attributes{"bytes": 4096}}}},
}

// NetworkFaults are the kinds' names, sorted.
func NetworkFaults() []string {
	names := make([]string, 0, len(networkFaults))
	for n := range networkFaults {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// FaultOf is the network fault of a kind.
func FaultOf(kind string) (NetworkFault, error) {
	f, ok := networkFaults[kind]
	if !ok {
		return f, fmt.Errorf("no network fault %q (there are %s)", kind, strings.Join(NetworkFaults(), ", "))
	}
	return f, nil
}

// Inject puts the fault of kind on each of toxiproxy's proxies named.
func Inject(c *toxiproxy.Client, kind string, proxies ...string) error {
	f, err := FaultOf(kind)
	if err != nil {
		return err
	}
	for _, name := range proxies {
		p, err := c.Proxy(name)
		if err != nil {
			return fmt.Errorf("toxiproxy proxy %s: %w", name, err)
		}
		if f.Disable {
			if err := p.Disable(); err != nil {
				return fmt.Errorf("toxiproxy proxy %s: disable: %w", name, err)
			}
		}
		for _, t := range f.Toxics {
			if _, err := p.AddToxic(t.Name, t.Type, t.Stream, t.Toxicity, t.Attributes); err != nil {
				return fmt.Errorf("toxiproxy proxy %s: toxic %s: %w", name, t.Name, err)
			}
		}
	}
	return nil
}
