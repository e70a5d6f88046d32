-- One confirmed order per buyer per sale, while rejected and cancelled orders of the same buyer
-- are still stored (every order a buyer was told about becomes exactly one row). MariaDB has no
-- partial indexes, so a generated column is NULL for any order that is not confirmed, and a
-- unique key does not compare NULLs.

-- +goose Up
ALTER TABLE seckill_orders
    DROP INDEX one_per_buyer,
    ADD COLUMN confirmed_uid VARCHAR(64) AS (IF(status = 'confirmed', uid, NULL)) PERSISTENT,
    ADD UNIQUE KEY one_confirmed_per_buyer (sale_version, sku, confirmed_uid),
    ADD KEY by_buyer (sale_version, sku, uid);

-- +goose Down
ALTER TABLE seckill_orders
    DROP INDEX one_confirmed_per_buyer,
    DROP INDEX by_buyer,
    DROP COLUMN confirmed_uid,
    ADD UNIQUE KEY one_per_buyer (sale_version, sku, uid);
