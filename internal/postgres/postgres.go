// Package postgres keeps what several replicas of terp serve must share in
// one PostgreSQL database: the server's state (state.State: uploaded files
// with their content, containers, stored responses, token usage) and the
// conversation store (store.Store: the records and the uploads kept with
// them). Replicas on different machines share no disk, so file content is
// in the database too, in rows of 1 MiB.
//
// Open migrates the schema to the version this terp knows (see migrate.go
// and docs/postgres.md). A conversation's lock is a session-level advisory
// lock on a connection of the DB's own (lock.go), so the server releases it
// when the process holding it dies, however it dies.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is an open PostgreSQL database holding terp's tables. Every method of
// it and of the State and Conversations it gives is safe for concurrent
// use.
type DB struct {
	pool   *pgxpool.Pool
	where  string
	schema string
	log    *slog.Logger
	locks  *locker
}

// Option changes how Open sets up a DB.
type Option func(*DB)

// WithLog sends what the DB has to say outside any call (a conversation
// lock lost with its connection, and re-taken or not) to log instead of
// slog's default logger.
func WithLog(log *slog.Logger) Option { return func(db *DB) { db.log = log } }

const (
	// connectTimeout bounds connecting when the URL sets no
	// connect_timeout: an unreachable server is reported, not waited on.
	connectTimeout = 15 * time.Second
	// maxConns is the pool's size when the URL sets no pool_max_conns.
	// An upload holds a connection for as long as the client sends it, so
	// pgxpool's default (the number of cores, at least 4) is too few.
	maxConns = 20
	// opTimeout bounds one statement of a method without a context (the
	// conversation store's): a database that stops answering fails the
	// call instead of hanging it.
	opTimeout = time.Minute
)

// Open connects to the database at rawURL, a PostgreSQL URL
// (postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=...) or a
// keyword/value string, and migrates its schema. Tables go in the first
// schema of the URL's search_path (public by default).
func Open(ctx context.Context, rawURL string, opts ...Option) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		return nil, fmt.Errorf("the PostgreSQL URL is not valid (%w); write it as postgres://USER:PASSWORD@HOST:5432/DATABASE", err)
	}
	if !strings.Contains(rawURL, "pool_max_conns") {
		cfg.MaxConns = maxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	db := &DB{where: whereOf(cfg.ConnConfig), log: slog.Default()}
	for _, o := range opts {
		o(db)
	}

	// The first connection tells a bad address from bad credentials, and
	// migrates; it is closed after, which frees the migration lock.
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		return nil, connectError(db.where, cfg.ConnConfig, err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var schema *string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, fmt.Errorf("PostgreSQL at %s: %w", db.where, err)
	}
	if schema == nil {
		return nil, fmt.Errorf("PostgreSQL at %s: no schema of the search_path exists; create one (CREATE SCHEMA) or fix search_path in the URL", db.where)
	}
	db.schema = *schema
	if err := migrate(ctx, conn, db.where, db.schema); err != nil {
		return nil, err
	}

	if db.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, connectError(db.where, cfg.ConnConfig, err)
	}
	db.locks = newLocker(db, cfg.ConnConfig)
	return db, nil
}

// Close closes the pool and the lock connection, which releases every
// conversation lock this DB holds.
func (db *DB) Close() {
	db.locks.close()
	db.pool.Close()
}

// Where names the database in messages, without the password:
// postgres://USER@HOST:PORT/DATABASE.
func (db *DB) Where() string { return db.where }

// State is the server's state in this database.
func (db *DB) State() State { return State{db: db} }

// Conversations is the conversation store in this database.
func (db *DB) Conversations() Conversations { return Conversations{db: db} }

// op is the context of one statement of a method that has none.
func op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// rollback ends tx unless it was committed; it runs even when the call's
// context is done, so the connection goes back to the pool clean.
func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = tx.Rollback(ctx)
}

func whereOf(c *pgx.ConnConfig) string {
	u := url.URL{Scheme: "postgres", User: url.User(c.User), Path: "/" + c.Database}
	q := url.Values{}
	if strings.HasPrefix(c.Host, "/") {
		q.Set("host", c.Host) // a Unix socket's directory
		if c.Port != 5432 {
			q.Set("port", strconv.Itoa(int(c.Port)))
		}
	} else {
		u.Host = net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
	}
	if sp := c.RuntimeParams["search_path"]; sp != "" {
		q.Set("search_path", sp)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// PostgreSQL's error codes that Open explains.
const (
	codeInvalidPassword      = "28P01"
	codeInvalidAuthorization = "28000" // no such role, or pg_hba.conf refuses
	codeNoDatabase           = "3D000"
	codeTooManyConnections   = "53300"
	codeNoPrivilege          = "42501"
	codeUniqueViolation      = "23505"
)

// connectError says what to do about a failed connection: fix the address,
// the credentials or the database name. The cause comes last, since pgx's
// can take several lines (one per address tried).
func connectError(where string, c *pgx.ConnConfig, err error) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case codeInvalidPassword, codeInvalidAuthorization:
			return fmt.Errorf("PostgreSQL at %s refused user %q; check the user and password in the URL, and that the server's pg_hba.conf lets the user in from here: %w", where, c.User, err)
		case codeNoDatabase:
			return fmt.Errorf("PostgreSQL at %s has no database %q; create it (createdb --owner=%s %s) or name another in the URL: %w", where, c.Database, c.User, c.Database, err)
		case codeTooManyConnections:
			return fmt.Errorf("PostgreSQL at %s has no connection left; raise its max_connections, or lower pool_max_conns in the URL of each replica: %w", where, err)
		}
		return fmt.Errorf("PostgreSQL at %s refused the connection: %w", where, err)
	}
	return fmt.Errorf("cannot reach PostgreSQL at %s; check that the server is running and that the URL's host and port are right: %w", where, err)
}

// isCode reports whether err is PostgreSQL's error code.
func isCode(err error, code string) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == code
}

// text is s as a text column holds it. PostgreSQL refuses NUL and invalid
// UTF-8, which a client's filename may hold; each becomes U+FFFD, as
// encoding/json turns invalid UTF-8 into it in the directory's records.
func text(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// hash64 is the FNV-1a hash of the parts, each ended by a NUL.
func hash64(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}
