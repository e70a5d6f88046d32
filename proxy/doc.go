// Package proxy is the RESP server that applications' Redis clients connect to: it accepts
// connections, reads each client's requests with Redis's own limits (internal/resp), enforces
// the client and pipeline bounds, hands every command to the router (or, for plain
// pass-through, straight to Redis from the event loop), and writes the replies back in order
// (with tidwall/redcon's writer). It drains in-flight calls on shutdown.
//
// It also runs the buys: its buy engine (engine.go) gathers them, sends guard's script calls
// on the core's own connections and settles them, in an event loop or in the buy shell
// (buyshell.go); what a buy decides (admission, the script's arguments, the reading of its
// reply, the reply's bytes) is guard's, through guard.Loop. The buyers' outcome channels
// (outcomes.go) and the live sale page (salepage.go) show what guard knows of the sales.
package proxy
