// Package proxy is the RESP server that applications' Redis clients connect to: it accepts
// connections (tidwall/redcon), enforces the client and pipeline bounds, authenticates,
// reads each client's pipeline as one batch, hands every command to the router, and
// writes the replies back in order. It drains in-flight calls on shutdown.
//
// proxy knows nothing about stock or sales: what a command does is the router's business.
package proxy
