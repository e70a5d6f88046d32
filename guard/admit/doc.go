// Package admit holds the admission decisions that a buy gets with no network call: the
// tokens a proxy leased from a sale's shared rate (Lease), a buyer's recent attempts
// (Attempts), and the deny list (DenyList). Every decision takes the time as an argument, so
// that tests drive the clock; package guard keeps their state in step with Redis.
package admit
