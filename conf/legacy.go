package conf

// A service's own stock scripts, which the proxy runs as SECKILL.BUY (buy.legacy_scripts).

// LegacyScript is a service's own stock script that the proxy runs as a SECKILL.BUY (with
// buy.legacy_scripts): given by its body (recognised whatever its comments and whitespace)
// or its SHA1, with where its SKU, uid and quantity are, and what it answers.
type LegacyScript struct {
	Name string `koanf:"name"`
	Body string `koanf:"body"`
	SHA1 string `koanf:"sha1"`
	// StockKey is KEYS[1]'s pattern, with {sku} where the SKU is: "seckill:stock:{sku}".
	StockKey string `koanf:"stock_key"`
	// Keys is how many keys the script takes; UIDArg and QtyArg are 1-based ARGV positions
	// (UIDArg 0: no buyer, every call a new one).
	Keys    int           `koanf:"keys"`
	UIDArg  int           `koanf:"uid_arg"`
	QtyArg  int           `koanf:"qty_arg"`
	Replies LegacyReplies `koanf:"replies"`
}

// LegacyReplies are the integers a legacy stock script answers.
type LegacyReplies struct {
	Success   int64 `koanf:"success"`
	SoldOut   int64 `koanf:"sold_out"`
	Duplicate int64 `koanf:"duplicate"`
	NoSale    int64 `koanf:"no_sale"`
}
