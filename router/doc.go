// Package router holds the command table: for every command the proxy answers itself, its
// name, arity, flags and handler. It matches names case-insensitively, checks arity before
// dispatch, serves SECKILL.* through guard and the connection commands itself, and answers
// the rest as Redis would.
//
// router does not touch sockets (that is proxy) nor run Lua (that is guard).
package router
