package sink

import (
	"encoding/json"
	"errors"
	"fmt"

	"seckill-proxy/guard"
)

// MessageVersion is the version of the order message format. A consumer refuses (and
// dead-letters) versions it does not know.
const MessageVersion = 1

// Order is one sold order (or its release, with type "release") as it travels on Kafka,
// keyed by SKU, encoded as JSON:
//
//	{"v":1,"type":"order","order_id":"dc6f2p1ksdu8am6vpjd0","sale_version":1,"sku":"sku_1001",
//	 "uid":"user_42","qty":1,"ts":1764474339124,"proxy":"host:4242"}
//
// ts is the Redis server time of the buy in Unix milliseconds; proxy names the instance that
// made the order (or that republished it from the outbox).
type Order struct {
	V           int    `json:"v"`
	Type        string `json:"type"`
	OrderID     string `json:"order_id"`
	SaleVersion int64  `json:"sale_version"`
	SKU         string `json:"sku"`
	UID         string `json:"uid"`
	Qty         int64  `json:"qty"`
	TS          int64  `json:"ts"`
	Proxy       string `json:"proxy"`
}

// Message types: a sold order, or the release of one (SECKILL.RELEASE), which the sink turns
// into a cancelled order and stock given back.
const (
	TypeOrder   = guard.KindOrder
	TypeRelease = guard.KindRelease
)

// ErrMalformed wraps every reason a message cannot be an order.
var ErrMalformed = errors.New("malformed order message")

// Encode renders o as its Kafka value.
func (o *Order) Encode() []byte {
	b, _ := json.Marshal(o) // a struct of strings and integers always encodes
	return b
}

// DecodeOrder parses and checks a Kafka value.
func DecodeOrder(b []byte) (Order, error) {
	var o Order
	if err := json.Unmarshal(b, &o); err != nil {
		return Order{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case o.V != MessageVersion:
		return Order{}, fmt.Errorf("%w: version %d, want %d", ErrMalformed, o.V, MessageVersion)
	case o.Type != TypeOrder && o.Type != TypeRelease:
		return Order{}, fmt.Errorf("%w: type %q", ErrMalformed, o.Type)
	case o.OrderID == "" || len(o.OrderID) > 32:
		return Order{}, fmt.Errorf("%w: order_id %q", ErrMalformed, o.OrderID)
	case !guard.ValidID([]byte(o.SKU)) || !guard.ValidID([]byte(o.UID)):
		return Order{}, fmt.Errorf("%w: sku %q uid %q", ErrMalformed, o.SKU, o.UID)
	case o.Qty < 1 || o.Qty > guard.MaxLimit:
		return Order{}, fmt.Errorf("%w: qty %d", ErrMalformed, o.Qty)
	case o.SaleVersion < 1:
		return Order{}, fmt.Errorf("%w: sale_version %d", ErrMalformed, o.SaleVersion)
	}
	return o, nil
}
