// Package proxy is the RESP server that applications' Redis clients connect to: it accepts
// connections, reads each client's requests with Redis's own limits (internal/resp), enforces
// the client and pipeline bounds, hands every command to the router (or, for plain
// pass-through, straight to Redis from the event loop), and writes the replies back in order
// (with tidwall/redcon's writer). It drains in-flight calls on shutdown.
//
// proxy knows nothing about stock or sales: what a command does is the router's business.
package proxy
