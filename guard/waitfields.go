package guard

// WaitFields are the waits' counters, for INFO and the metrics.
func (g *Guard) WaitFields() []Field {
	ws := &g.waits
	ws.mu.Lock()
	n, readers := ws.n, len(ws.readers)
	ws.mu.Unlock()
	return []Field{
		{Name: "status_waiting", Value: int64(n), Metric: &Metric{Name: "seckill_proxy_status_waiting", Help: "Buyers waiting for their order's outcome on this proxy now (SECKILL.STATUS ... WAIT, outcome channels).", Gauge: true}},
		{Name: "status_outcome_readers", Value: int64(readers), Metric: &Metric{Name: "seckill_proxy_status_outcome_readers", Help: "Sale buckets whose outcome stream this proxy reads now, for the buyers waiting.", Gauge: true}},
		{Name: "status_outcome_readers_started", Value: ws.started.Load(), Metric: &Metric{Name: "seckill_proxy_status_outcome_readers_started_total", Help: "Outcome stream readers started: a bucket got its first waiting buyer (a buyer with no order, or whose outcome is known, starts none)."}},
		{Name: "status_waits", Value: ws.waits.Load(), Metric: &Metric{Name: "seckill_proxy_status_waits_total", Help: "Waits for an order's outcome begun: the buyer's order was found pending."}},
		{Name: "status_woken", Value: ws.woken.Load(), Metric: &Metric{Name: "seckill_proxy_status_woken_total", Help: "Waiting buyers woken by their sale's outcome stream."}},
		{Name: "status_resynced", Value: ws.resynced.Load(), Metric: &Metric{Name: "seckill_proxy_status_resynced_total", Help: "Waiting buyers woken by the catch-up from the result hash (status.resync)."}},
		{Name: "status_timed_out", Value: ws.timedOut.Load(), Metric: &Metric{Name: "seckill_proxy_status_timed_out_total", Help: "Waits that ended with no outcome known (answered pending)."}},
		{Name: "status_reads", Value: ws.reads.Load(), Metric: &Metric{Name: "seckill_proxy_status_reads_total", Help: "Status reads sent to Redis (status.lua calls: one per STATUS, or one per bucket for a batch of waits)."}},
		{Name: "status_no_sale_local", Value: ws.noSale.Load(), Metric: &Metric{Name: "seckill_proxy_status_no_sale_local_total", Help: "STATUS reads, waits and outcome channels of a SKU with no sale, answered none from memory with no Redis call."}},
		{Name: "status_limited_unknown_sku", Value: ws.limited.Load(), Metric: &Metric{Name: "seckill_proxy_status_limited_unknown_sku_total", Help: "STATUS reads, waits and outcome channels of SKUs this proxy knows nothing of, refused LIMITED past admission.unknown_sku_rate."}},
		{Name: "status_read_retries", Value: ws.retried.Load(), Metric: &Metric{Name: "seckill_proxy_status_read_retries_total", Help: "First status reads of a wait tried again after Redis failed them (a master failing over)."}},
	}
}
