package testenv

import _ "embed"

// SeedsBuyAsCarried and SeedsDeductAsCarried are the seeds' stock scripts as the services
// built on them carry them: locals first, a comment on most lines, so another SHA1 than the
// proxy's built-in copies. Tests of legacy recognition use them as a legacy service sends them.
var (
	//go:embed carried/seeds_buy.lua
	SeedsBuyAsCarried string
	//go:embed carried/seeds_deduct.lua
	SeedsDeductAsCarried string
)
