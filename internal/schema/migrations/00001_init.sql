-- The sale's stock of record and its orders. The back office creates seckill_items rows; the
-- proxy never invents stock. stock is unsigned: it cannot go below zero.

-- +goose Up
CREATE TABLE IF NOT EXISTS seckill_items (
    sku          VARCHAR(64)     NOT NULL,
    name         VARCHAR(255)    NOT NULL DEFAULT '',
    stock        INT UNSIGNED    NOT NULL,
    status       ENUM('idle', 'warming', 'open', 'closed') NOT NULL DEFAULT 'idle',
    sale_version BIGINT UNSIGNED NOT NULL DEFAULT 0,
    updated_at   TIMESTAMP(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    PRIMARY KEY (sku)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

CREATE TABLE IF NOT EXISTS seckill_orders (
    order_id     VARCHAR(32)     NOT NULL,
    sku          VARCHAR(64)     NOT NULL,
    uid          VARCHAR(64)     NOT NULL,
    qty          INT UNSIGNED    NOT NULL,
    sale_version BIGINT UNSIGNED NOT NULL,
    status       ENUM('confirmed', 'rejected', 'cancelled') NOT NULL,
    reason       VARCHAR(255)    NOT NULL DEFAULT '',
    created_at   TIMESTAMP(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    PRIMARY KEY (order_id),
    UNIQUE KEY one_per_buyer (sale_version, sku, uid),
    KEY by_sku_status (sku, status)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;

-- +goose Down
DROP TABLE IF EXISTS seckill_orders;
DROP TABLE IF EXISTS seckill_items;
