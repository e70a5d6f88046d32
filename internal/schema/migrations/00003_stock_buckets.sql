-- A sale split into stock buckets (SECKILL.WARM ... BUCKETS k) keeps its stock in a row per
-- (sku, bucket), each unsigned, so that no batch can take a bucket below zero and the sinks
-- that drain different buckets do not wait on one row's lock. bucket is the bucket's tag
-- number (0 for the sale's own). While a sale is split, its seckill_items.stock is 0 and its
-- rows hold the stock; WARM moves the stock between them. seckill_stock is the item's total,
-- one query whatever the split: SELECT stock FROM seckill_stock WHERE sku = ?.

-- +goose Up
CREATE TABLE IF NOT EXISTS seckill_item_buckets (
    sku        VARCHAR(64)       NOT NULL,
    bucket     SMALLINT UNSIGNED NOT NULL,
    stock      INT UNSIGNED      NOT NULL,
    updated_at TIMESTAMP(3)      NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (sku, bucket)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE OR REPLACE VIEW seckill_stock AS
    SELECT i.sku, i.stock + COALESCE((SELECT SUM(b.stock) FROM seckill_item_buckets b WHERE b.sku = i.sku), 0) AS stock
    FROM seckill_items i;

-- +goose Down
DROP VIEW IF EXISTS seckill_stock;
DROP TABLE IF EXISTS seckill_item_buckets;
