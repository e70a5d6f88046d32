package sink

import (
	"context"
	"testing"
	"time"

	"seckill-proxy/internal/testenv"
)

// TestMySQLSmoke proves MySQL is real: go-sql-driver/mysql runs a transaction on the seckill
// database, and a rolled-back write is not visible afterwards.
func TestMySQLSmoke(t *testing.T) {
	db := testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS smoke (id INT PRIMARY KEY, n INT NOT NULL) ENGINE=InnoDB`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec(`DROP TABLE IF EXISTS smoke`) })

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO smoke (id, n) VALUES (1, 41) ON DUPLICATE KEY UPDATE n = 41`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE smoke SET n = n + 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE smoke SET n = 0 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var n int
	var schema string
	if err := db.QueryRowContext(ctx, `SELECT n, DATABASE() FROM smoke WHERE id = 1`).Scan(&n, &schema); err != nil {
		t.Fatal(err)
	}
	if n != 42 || schema != "seckill" {
		t.Fatalf("got n=%d in %q, want 42 in seckill", n, schema)
	}
}
