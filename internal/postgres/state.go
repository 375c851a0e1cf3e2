package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terpdev/terp/internal/serve/state"
)

// State is terp serve's state in the database, shared by every replica
// that opens it: a file uploaded through one is downloaded through another.
type State struct {
	db *DB
}

var _ state.State = State{}

// Where names the database.
func (s State) Where() string { return s.db.where }

// Close does nothing: the DB that gave the state closes it, since the
// conversation store shares its connections.
func (s State) Close() error { return nil }

// Check makes a write that it rolls back, so a database that is read-only
// (a standby), unreachable or refuses this user's writes fails /readyz.
func (s State) Check(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO token_usage (owner, day, tokens) VALUES ('', '', 0) ON CONFLICT DO NOTHING"); err != nil {
			return err
		}
		return errCheck // roll back
	})
	if err != nil && !errors.Is(err, errCheck) {
		return fmt.Errorf("the server's state at %s is not writable: %w", s.db.where, err)
	}
	return nil
}

var errCheck = errors.New("checked")

// PutFile writes the record and the content in one transaction: other
// replicas see the file once it is whole, and a file refused (too large) or
// cut off leaves nothing.
func (s State) PutFile(ctx context.Context, f state.File, content io.Reader, max int64) (state.File, error) {
	if f.ID == "" {
		return f, errors.New("a file needs an id")
	}
	tx, err := s.db.pool.Begin(ctx)
	if err != nil {
		return f, fmt.Errorf("store file %s in %s: %w", f.ID, s.db.where, err)
	}
	defer rollback(ctx, tx)
	_, err = tx.Exec(ctx, "INSERT INTO files (id, owner, filename, purpose, bytes, created_at) VALUES ($1, $2, $3, $4, 0, $5)",
		f.ID, f.Owner, text(f.Filename), text(f.Purpose), f.CreatedAt)
	if isCode(err, codeUniqueViolation) {
		return f, fmt.Errorf("file %s exists already", f.ID)
	}
	if err != nil {
		return f, fmt.Errorf("store file %s in %s: %w", f.ID, s.db.where, err)
	}
	limit := max
	if max < math.MaxInt64 {
		limit++ // one byte past the bound tells too large from just right
	}
	n, err := writeChunks(ctx, tx, "INSERT INTO file_chunks (file_id, seq, data) VALUES ($1, $2, $3)", f.ID, io.LimitReader(content, limit), max)
	if errors.Is(err, state.ErrTooLarge) {
		return f, err
	}
	if err == nil {
		_, err = tx.Exec(ctx, "UPDATE files SET bytes = $2 WHERE id = $1", f.ID, n)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return f, fmt.Errorf("store file %s in %s: %w", f.ID, s.db.where, err)
	}
	f.Bytes, f.Filename, f.Purpose = n, text(f.Filename), text(f.Purpose)
	return f, nil
}

const fileColumns = "id, owner, filename, purpose, bytes, created_at"

func scanFile(row pgx.Row) (state.File, error) {
	var f state.File
	err := row.Scan(&f.ID, &f.Owner, &f.Filename, &f.Purpose, &f.Bytes, &f.CreatedAt)
	return f, err
}

func (s State) File(ctx context.Context, owner, id string) (state.File, error) {
	f, err := scanFile(s.db.pool.QueryRow(ctx, "SELECT "+fileColumns+" FROM files WHERE id = $1 AND owner = $2", id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.File{}, state.ErrNotFound
	}
	return f, err
}

// OpenFile streams the content a chunk at a time, with ctx. f is a file
// File returned, owner checked already, as the directory takes it.
func (s State) OpenFile(ctx context.Context, f state.File) (io.ReadCloser, error) {
	var size int64
	err := s.db.pool.QueryRow(ctx, "SELECT bytes FROM files WHERE id = $1", f.ID).Scan(&size)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, state.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &chunkReader{ctx: ctx, db: s.db, query: "SELECT data FROM file_chunks WHERE file_id = $1 AND seq = $2",
		key: f.ID, what: "file " + f.ID, size: size}, nil
}

func (s State) Files(ctx context.Context, owner string) ([]state.File, error) {
	rows, err := s.db.pool.Query(ctx, "SELECT "+fileColumns+" FROM files WHERE owner = $1 ORDER BY created_at DESC, id", owner)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.File, error) { return scanFile(row) })
}

// DeleteFile deletes the record and, with it, the content.
func (s State) DeleteFile(ctx context.Context, owner, id string) error {
	return deleted(s.db.pool.Exec(ctx, "DELETE FROM files WHERE id = $1 AND owner = $2", id, owner))
}

// deleted is ErrNotFound for a DELETE that found no row.
func deleted(tag interface{ RowsAffected() int64 }, err error) error {
	if err == nil && tag.RowsAffected() == 0 {
		return state.ErrNotFound
	}
	return err
}

func (s State) SaveContainer(ctx context.Context, c state.Container) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = s.db.pool.Exec(ctx, `INSERT INTO containers (id, owner, created_at, record) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, created_at = excluded.created_at, record = excluded.record`,
		c.ID, c.Owner, c.CreatedAt, string(b))
	if err != nil {
		return fmt.Errorf("save container %s in %s: %w", c.ID, s.db.where, err)
	}
	return nil
}

func scanContainer(row pgx.Row) (state.Container, error) {
	var rec string
	if err := row.Scan(&rec); err != nil {
		return state.Container{}, err
	}
	var c state.Container
	if err := json.Unmarshal([]byte(rec), &c); err != nil {
		return state.Container{}, fmt.Errorf("a container's record is damaged: %w", err)
	}
	return c, nil
}

func (s State) Container(ctx context.Context, owner, id string) (state.Container, error) {
	c, err := scanContainer(s.db.pool.QueryRow(ctx, "SELECT record FROM containers WHERE id = $1 AND owner = $2", id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Container{}, state.ErrNotFound
	}
	return c, err
}

func (s State) Containers(ctx context.Context, owner string) ([]state.Container, error) {
	rows, err := s.db.pool.Query(ctx, "SELECT record FROM containers WHERE $1 = '' OR owner = $1 ORDER BY created_at DESC, id", owner)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (state.Container, error) { return scanContainer(row) })
}

func (s State) DeleteContainer(ctx context.Context, owner, id string) error {
	return deleted(s.db.pool.Exec(ctx, "DELETE FROM containers WHERE id = $1 AND owner = $2", id, owner))
}

// SaveResponse stores r and forgets the owner's responses past the keep
// newest, in one transaction.
func (s State) SaveResponse(ctx context.Context, r state.Response, keep int) error {
	err := pgx.BeginFunc(ctx, s.db.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO responses (id, owner, container, created_at, object, history) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, container = excluded.container, created_at = excluded.created_at,
				object = excluded.object, history = excluded.history`,
			r.ID, r.Owner, r.Container, r.CreatedAt, jsonText(r.Object), jsonText(r.History))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM responses WHERE id IN (
			SELECT id FROM responses WHERE owner = $1 ORDER BY created_at DESC, id DESC OFFSET $2)`, r.Owner, max(keep, 0))
		return err
	})
	if err != nil {
		return fmt.Errorf("store response %s in %s: %w", r.ID, s.db.where, err)
	}
	return nil
}

// jsonText is raw JSON as a json column takes it: null for none.
func jsonText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	return string(raw)
}

func (s State) Response(ctx context.Context, owner, id string) (state.Response, error) {
	r := state.Response{ID: id, Owner: owner}
	var object, history string
	err := s.db.pool.QueryRow(ctx, "SELECT container, created_at, object, history FROM responses WHERE id = $1 AND owner = $2", id, owner).
		Scan(&r.Container, &r.CreatedAt, &object, &history)
	if errors.Is(err, pgx.ErrNoRows) {
		return state.Response{}, state.ErrNotFound
	}
	if err != nil {
		return state.Response{}, err
	}
	r.Object, r.History = json.RawMessage(object), json.RawMessage(history)
	return r, nil
}

func (s State) DeleteResponse(ctx context.Context, owner, id string) error {
	return deleted(s.db.pool.Exec(ctx, "DELETE FROM responses WHERE id = $1 AND owner = $2", id, owner))
}

// AddUsage adds to the day's count in one statement, so replicas adding at
// once lose nothing, and forgets the owner's days before yesterday, as the
// directory does: only today and yesterday matter.
func (s State) AddUsage(ctx context.Context, owner, day string, tokens int64) (int64, error) {
	var n int64
	err := s.db.pool.QueryRow(ctx, `WITH forget AS (DELETE FROM token_usage WHERE owner = $1 AND day < $4)
		INSERT INTO token_usage (owner, day, tokens) VALUES ($1, $2, $3)
		ON CONFLICT (owner, day) DO UPDATE SET tokens = token_usage.tokens + excluded.tokens
		RETURNING tokens`, owner, day, tokens, dayBefore(day)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count tokens in %s: %w", s.db.where, err)
	}
	return n, nil
}

// dayBefore is the day before day (2006-01-02), or day if it is not one.
func dayBefore(day string) string {
	t, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return day
	}
	return t.AddDate(0, 0, -1).Format(time.DateOnly)
}

func (s State) Usage(ctx context.Context, owner, day string) (int64, error) {
	var n int64
	err := s.db.pool.QueryRow(ctx, "SELECT tokens FROM token_usage WHERE owner = $1 AND day = $2", owner, day).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// AddGone forgets the owner's old answers and remembers the new ones in
// one statement.
func (s State) AddGone(ctx context.Context, owner string, digests []string, at, forget time.Time) error {
	_, err := s.db.pool.Exec(ctx, `WITH forget AS (DELETE FROM gone_answers WHERE owner = $1 AND removed_at < $4)
		INSERT INTO gone_answers (owner, digest, removed_at) SELECT $1, d, $3 FROM unnest($2::text[]) AS d
		ON CONFLICT (owner, digest) DO UPDATE SET removed_at = excluded.removed_at`, owner, digests, at, forget)
	if err != nil {
		return fmt.Errorf("remember a removed container's answers in %s: %w", s.db.where, err)
	}
	return nil
}

func (s State) Gone(ctx context.Context, owner, digest string) (bool, error) {
	var gone bool
	err := s.db.pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM gone_answers WHERE owner = $1 AND digest = $2)", owner, digest).Scan(&gone)
	return gone, err
}
