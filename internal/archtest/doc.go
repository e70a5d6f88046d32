// Package archtest holds the layering rules' test: every project package imports only what
// docs/ARCHITECTURE.md's table of packages says it may. The table is the one statement of
// the rules; this package has no code of its own.
package archtest
