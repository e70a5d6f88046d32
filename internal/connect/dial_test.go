package connect

import (
	"net"
	"testing"
	"time"
)

// TestDialerMap: an address in the map is dialled where the map sends it; one not in the map
// is dialled as given.
func TestDialerMap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	d := Dialer{Timeout: time.Second, Map: map[string]string{"192.0.2.1:7000": ln.Addr().String()}}
	c, err := d.Dial("tcp", "192.0.2.1:7000")
	if err != nil {
		t.Fatalf("a mapped address: %v", err)
	}
	if got := c.RemoteAddr().String(); got != ln.Addr().String() {
		t.Errorf("dialled %s, want %s", got, ln.Addr())
	}
	c.Close()
	c, err = d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("an address not in the map: %v", err)
	}
	c.Close()
}
