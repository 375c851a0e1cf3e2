package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The schema's versions, one file each: NNNN_what.sql, applied in order,
// each in a transaction of its own with its row in schema_migrations, so a
// migration is in the database whole or not at all. A released terp's
// migrations are never edited: a change to the schema is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations are the embedded files, checked to be numbered 1, 2, 3…
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for i, name := range names { // Glob sorts them
		base := strings.TrimPrefix(name, "migrations/")
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want version %d first in its name", base, i+1)
		}
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	return ms, nil
}

// migrationLock is the class of the advisory lock that one replica holds
// while it migrates, so that two starting at once do not both apply the
// same version. It is in the two-int key space of advisory locks, apart
// from conversation locks' single bigint keys; the second int is a hash
// of the schema.
const migrationLock = 0x74657270 // "terp"

// migrate brings the schema in conn's current schema to the newest version
// this terp knows, and refuses a database migrated by a newer terp.
func migrate(ctx context.Context, conn *pgx.Conn, where, schema string) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	latest := len(ms)
	// Held until conn closes (Open closes it after), so an error or a
	// cancelled context cannot leave it behind.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", int32(migrationLock), int32(hash64(schema))); err != nil {
		return fmt.Errorf("PostgreSQL at %s: wait for another terp's migration: %w", where, err)
	}
	table := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = 'schema_migrations')", schema).Scan(&exists); err != nil {
		return fmt.Errorf("PostgreSQL at %s: %w", where, err)
	}
	// Created only when missing: CREATE TABLE IF NOT EXISTS needs the
	// right to create even when the table is there, and a replica may run
	// as a role that only uses the tables.
	if !exists {
		_, err := conn.Exec(ctx, `CREATE TABLE `+table+` (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`)
		if err != nil {
			return migrationError(where, conn, schema, err)
		}
	}
	var current int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+table).Scan(&current); err != nil {
		return fmt.Errorf("PostgreSQL at %s: read the schema's version: %w", where, err)
	}
	if current > latest {
		return fmt.Errorf("the database at %s has terp's schema at version %d, and this terp knows only versions up to %d; upgrade terp (every replica must run a terp that knows the schema), or point it at another database",
			where, current, latest)
	}
	for _, m := range ms[current:] {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+table+" (version, name) VALUES ($1, $2)", m.version, m.name)
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate to version %d (%s): %w", m.version, m.name, migrationError(where, conn, schema, err))
		}
	}
	return nil
}

// migrationError explains a migration refused for want of privilege.
func migrationError(where string, conn *pgx.Conn, schema string, err error) error {
	if isCode(err, codeNoPrivilege) {
		user := conn.Config().User
		return fmt.Errorf("user %q may not create terp's tables in schema %q of %s (%w); grant it CREATE on the schema (GRANT CREATE ON SCHEMA %s TO %s), or make it the database's owner",
			user, schema, where, err, schema, user)
	}
	return fmt.Errorf("PostgreSQL at %s: %w", where, err)
}
