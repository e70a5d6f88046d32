// Package schema owns the MySQL schema: versioned migrations embedded in the binaries and
// applied with pressly/goose. Migrate is idempotent and safe to call from several processes
// at once: a MySQL named lock lets one of them apply the migrations while the rest wait.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/pressly/goose/v3"
	"go.uber.org/zap"

	"seckill-proxy/conf"
	"seckill-proxy/internal/tlsfiles"
)

//go:embed migrations/*.sql
var migrations embed.FS

const lockName = "seckill-proxy.migrate"

// Migrate applies every migration not yet applied to db, and returns the schema version.
func Migrate(ctx context.Context, db *sql.DB, log *zap.Logger) (int64, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 30)", lockName).Scan(&got); err != nil {
		return 0, fmt.Errorf("migrate: lock: %w", err)
	}
	if got.Int64 != 1 {
		return 0, fmt.Errorf("migrate: another process held %q for 30s", lockName)
	}
	defer func() {
		// The lock also goes when the connection closes, just after.
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", lockName); err != nil {
			log.Warn("migrate: could not release the lock", zap.Error(err))
		}
	}()

	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return 0, err
	}
	p, err := goose.NewProvider(goose.DialectMySQL, db, sub)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	for _, r := range results {
		log.Info("migration applied", zap.Int64("version", r.Source.Version), zap.String("file", r.Source.Path), zap.Duration("took", r.Duration))
	}
	return p.GetDBVersion(ctx)
}

// Open returns a pool on c.DSN with c's limits, over TLS with mysql.tls (the server's
// certificate verified against its CA file, for its name). It does not connect: the first
// use does.
//
// Unless the DSN says otherwise, the driver puts a query's arguments into its text
// (interpolateParams): a query with arguments is then one round trip, where a prepared one is
// three (prepare, execute, close), and a WARM makes a dozen. The driver escapes them for the
// connection's character set, and prepares the statement as before where it cannot (a
// character set whose escaping is unsafe, a query above max_allowed_packet).
func Open(c conf.MySQL) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(c.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	if !strings.Contains(c.DSN, "interpolateParams=") {
		cfg.InterpolateParams = true
	}
	tc, err := tlsfiles.Client("mysql.tls", c.TLS, nil)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		if tc.ServerName == "" {
			if host, _, err := net.SplitHostPort(cfg.Addr); err == nil {
				tc.ServerName = host // verify the host dialled, as the driver's tls=true does
			}
		}
		cfg.TLS = tc
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(c.MaxOpenConns)
	db.SetMaxIdleConns(c.MaxIdleConns)
	db.SetConnMaxLifetime(c.ConnMaxLifetime)
	return db, nil
}
