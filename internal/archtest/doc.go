// Package archtest holds the project's shape, as tests: every project package imports only
// what docs/ARCHITECTURE.md's table of packages says it may (the table is the one statement
// of the rules), and no file of code grows past 450 lines. It has no code of its own.
package archtest
