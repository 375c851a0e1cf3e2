package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/terpdev/terp/internal/serve/state"
)

// chunkSize is the most content one row holds: a statement never moves a
// whole file, and a download holds no connection between chunks.
const chunkSize = 1 << 20

// writeChunks copies r into rows through insert ($1 key, $2 the chunk's
// number from 0, $3 its bytes) in tx, and returns how many bytes it read.
// With max >= 0, content over max bytes is ErrTooLarge, found before the
// chunk that passes it is written: the caller rolls tx back, which leaves
// nothing.
func writeChunks(ctx context.Context, tx pgx.Tx, insert string, key any, r io.Reader, max int64) (int64, error) {
	buf := make([]byte, chunkSize)
	var n int64
	for seq := 0; ; seq++ {
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			n += int64(k)
			if max >= 0 && n > max {
				return n, state.ErrTooLarge
			}
			sctx, cancel := context.WithTimeout(ctx, opTimeout)
			_, xerr := tx.Exec(sctx, insert, key, seq, buf[:k])
			cancel()
			if xerr != nil {
				return n, xerr
			}
		}
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return n, nil
		case err != nil:
			return n, err
		}
	}
}

// chunkReader streams content back one chunk per query, so a slow reader
// holds no connection. The content it reads is never changed in place (a
// replaced upload is a new row), so a chunk missing before size bytes were
// read means the content was deleted meanwhile: an error, never a short
// file.
type chunkReader struct {
	ctx   context.Context
	db    *DB
	query string // $1 key, $2 the chunk's number
	key   any
	what  string // in errors: "file file-abc"
	size  int64
	read  int64
	seq   int
	buf   []byte
	done  bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.done {
		return 0, fmt.Errorf("read %s: the reader is closed", r.what)
	}
	for len(r.buf) == 0 {
		if r.read >= r.size {
			return 0, io.EOF
		}
		ctx, cancel := context.WithTimeout(r.ctx, opTimeout)
		err := r.db.pool.QueryRow(ctx, r.query, r.key, r.seq).Scan(&r.buf)
		cancel()
		if errors.Is(err, pgx.ErrNoRows) || err == nil && len(r.buf) == 0 {
			return 0, fmt.Errorf("read %s: it was deleted while being read (%d of %d bytes read): %w", r.what, r.read, r.size, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return 0, fmt.Errorf("read %s from %s: %w", r.what, r.db.where, err)
		}
		r.seq++
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	r.read += int64(n)
	return n, nil
}

func (r *chunkReader) Close() error {
	r.done, r.buf = true, nil
	return nil
}
