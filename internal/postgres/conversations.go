package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terpdev/terp/internal/store"
)

// Conversations is the conversation store in the database, shared by every
// replica that opens it. A record is one row, written whole by one
// statement, so a save is atomic as the directory's rename is.
type Conversations struct {
	db *DB
}

var _ store.Store = Conversations{}

// Where names the database: what to fix when a save fails.
func (s Conversations) Where() string { return s.db.where }

func (s Conversations) Save(c *store.Conversation) error {
	if !store.ValidID(c.ID) {
		return fmt.Errorf("save conversation %q: not a conversation id", c.ID)
	}
	c.Updated = time.Now().UTC()
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("save conversation %s: %w", c.ID, err)
	}
	ctx, cancel := op()
	defer cancel()
	_, err = s.db.pool.Exec(ctx, `INSERT INTO conversations (id, updated, record) VALUES ($1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET updated = excluded.updated, record = excluded.record`, c.ID, c.Updated, string(b))
	if err != nil {
		return fmt.Errorf("save conversation %s: %w", c.ID, err)
	}
	return nil
}

func (s Conversations) Load(id string) (*store.Conversation, error) {
	ctx, cancel := op()
	defer cancel()
	var rec string
	err := s.db.pool.QueryRow(ctx, "SELECT record FROM conversations WHERE id = $1", id).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", store.ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("load conversation %s from %s: %w", id, s.db.where, err)
	}
	return store.Decode(id, strings.NewReader(rec))
}

func (s Conversations) Resolve(prefix string) (string, error) {
	return store.ResolvePrefix(prefix, func(prefix string) ([]string, error) {
		ctx, cancel := op()
		defer cancel()
		// Not LIKE: a prefix is plain text, % and _ included.
		rows, err := s.db.pool.Query(ctx, "SELECT id FROM conversations WHERE left(id, length($1)) = $1 ORDER BY id LIMIT 6", prefix)
		if err != nil {
			return nil, fmt.Errorf("read the conversations in %s: %w", s.db.where, err)
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	})
}

// List reads every record, the most recently saved first; one that cannot
// be read is listed last with its error, as the directory lists it.
func (s Conversations) List() ([]store.Entry, error) {
	var out []store.Entry
	err := s.scan(func(e store.Entry) bool {
		out = append(out, e)
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b store.Entry) int {
		switch {
		case a.Err == nil && b.Err != nil:
			return -1
		case a.Err != nil && b.Err == nil:
			return 1
		}
		return 0
	})
	return out, nil
}

// Latest reads records, the most recently saved first, until one can be
// read.
func (s Conversations) Latest() (string, error) {
	var id string
	err := s.scan(func(e store.Entry) bool {
		if e.Err == nil {
			id = e.ID
		}
		return id == ""
	})
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", fmt.Errorf("%w yet: ask a question first", store.ErrNotFound)
	}
	return id, nil
}

// scan gives each conversation to fn, the most recently saved first, until
// fn returns false.
func (s Conversations) scan(fn func(store.Entry) bool) error {
	ctx, cancel := op()
	defer cancel()
	rows, err := s.db.pool.Query(ctx, "SELECT id, record FROM conversations ORDER BY updated DESC, id")
	if err != nil {
		return fmt.Errorf("read the conversations in %s: %w", s.db.where, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, rec string
		if err := rows.Scan(&id, &rec); err != nil {
			return fmt.Errorf("read the conversations in %s: %w", s.db.where, err)
		}
		c, err := store.Decode(id, strings.NewReader(rec))
		if !fn(store.Entry{ID: id, Conversation: c, Err: err}) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the conversations in %s: %w", s.db.where, err)
	}
	return nil
}

// Remove deletes the record and the kept uploads together.
func (s Conversations) Remove(id string) error {
	if !store.ValidID(id) {
		return fmt.Errorf("%w: %q", store.ErrNotFound, id)
	}
	ctx, cancel := op()
	defer cancel()
	err := pgx.BeginFunc(ctx, s.db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM inputs WHERE conversation = $1", id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM conversations WHERE id = $1", id)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove conversation %s: %w", id, err)
	}
	return nil
}

// Lock takes the conversation for this process (see locker).
func (s Conversations) Lock(id string) (store.Lock, error) { return s.db.locks.lock(id) }

// PutInput replaces the upload name in one transaction: a copy that fails
// midway is rolled back, and the earlier one stays whole.
func (s Conversations) PutInput(id, name string, r io.Reader) (int64, error) {
	ctx := context.Background() // each statement has its own bound
	sctx, cancel := op()
	tx, err := s.db.pool.Begin(sctx)
	cancel()
	if err != nil {
		return 0, err
	}
	defer rollback(ctx, tx)
	sctx, cancel = op()
	defer cancel()
	if _, err := tx.Exec(sctx, "DELETE FROM inputs WHERE conversation = $1 AND name = $2", id, text(name)); err != nil {
		return 0, err
	}
	var input int64
	if err := tx.QueryRow(sctx, "INSERT INTO inputs (conversation, name, bytes) VALUES ($1, $2, 0) RETURNING id", id, text(name)).Scan(&input); err != nil {
		return 0, err
	}
	n, err := writeChunks(ctx, tx, "INSERT INTO input_chunks (input, seq, data) VALUES ($1, $2, $3)", input, r, -1)
	if err != nil {
		return n, err
	}
	sctx, cancel = op()
	defer cancel()
	if _, err := tx.Exec(sctx, "UPDATE inputs SET bytes = $2 WHERE id = $1", input, n); err != nil {
		return n, err
	}
	return n, tx.Commit(sctx)
}

// OpenInput streams the upload back a chunk at a time.
func (s Conversations) OpenInput(id, name string) (io.ReadCloser, error) {
	ctx, cancel := op()
	defer cancel()
	var input, size int64
	err := s.db.pool.QueryRow(ctx, "SELECT id, bytes FROM inputs WHERE conversation = $1 AND name = $2", id, text(name)).Scan(&input, &size)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("open the kept copy of %s: %w", name, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	return &chunkReader{ctx: context.Background(), db: s.db, query: "SELECT data FROM input_chunks WHERE input = $1 AND seq = $2",
		key: input, what: "the kept copy of " + name, size: size}, nil
}

func (s Conversations) RemoveInput(id, name string) error {
	ctx, cancel := op()
	defer cancel()
	_, err := s.db.pool.Exec(ctx, "DELETE FROM inputs WHERE conversation = $1 AND name = $2", id, text(name))
	return err
}

func (s Conversations) HasInputs(id string) (bool, error) {
	ctx, cancel := op()
	defer cancel()
	var has bool
	err := s.db.pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM inputs WHERE conversation = $1)", id).Scan(&has)
	return has, err
}
