package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terpdev/terp/internal/serve/state"
)

// TakeRequest counts in one statement, so replicas taking at once take
// each request once. The bucket is kept as a generic cell rate (one
// timestamp, tat, instead of tokens and when they were counted, which
// needs no read before the write): each request moves tat on by the
// interval between two requests, 60/rpm seconds, from now if tat is
// behind it; a request passes while tat stays within rpm intervals (a
// minute) of now, which is a bucket of rpm refilled at rpm a minute. A
// refused request leaves tat as it was and is told how long until tat is
// back within bounds. The clock is the replica's (now): replicas' clocks
// that disagree by d shift a key's refills by d at most.
func (s State) TakeRequest(ctx context.Context, owner string, rpm int, now time.Time) (time.Duration, bool, error) {
	if rpm <= 0 {
		return 0, false, fmt.Errorf("a limit of %d requests a minute refuses everything", rpm)
	}
	// In microseconds, as timestamptz counts; rounded down, so that rpm
	// of them fit in a minute (but at least one: a limit over 60 million
	// a minute allows a little more).
	stepUS := max(int64(time.Minute/time.Microsecond)/int64(rpm), 1)
	burstUS := stepUS * int64(rpm)
	step, burst := time.Duration(stepUS)*time.Microsecond, time.Duration(burstUS)*time.Microsecond
	var (
		tat    time.Time
		passed bool
	)
	// The refusal's row is read from the statement's snapshot, from
	// before the update it did not make; a row that another replica made
	// meanwhile is in none, and the request is refused for one interval.
	err := s.db.pool.QueryRow(ctx, `WITH took AS (
		INSERT INTO request_rates AS r (owner, tat) VALUES ($1, $2::timestamptz + $3::float8 * interval '1 microsecond')
		ON CONFLICT (owner) DO UPDATE SET tat = GREATEST(r.tat, $2::timestamptz) + $3::float8 * interval '1 microsecond'
			WHERE GREATEST(r.tat, $2::timestamptz) + $3::float8 * interval '1 microsecond' <= $2::timestamptz + $4::float8 * interval '1 microsecond'
		RETURNING tat)
		SELECT tat, true FROM took
		UNION ALL SELECT tat, false FROM request_rates WHERE owner = $1 AND NOT EXISTS (SELECT FROM took)`,
		owner, now, float64(stepUS), float64(burstUS)).Scan(&tat, &passed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return step, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("count the requests of %s in %s: %w", owner, s.db.where, err)
	case passed:
		return 0, true, nil
	}
	if tat.Before(now) {
		tat = now
	}
	wait := tat.Add(step).Sub(now) - burst
	return max(wait, time.Millisecond), false, nil
}

// Advisory locks that HoldPlace takes for a transaction, in the two-int
// key space beside migrationLock: placesLock with 0 for everyone's count,
// ownerPlacesLock with a hash of the owner for one owner's.
const (
	placesLock      = 0x74706c61 // "tpla"
	ownerPlacesLock = 0x74706c6f // "tplo"
)

// HoldPlace counts and holds in one transaction under an advisory lock:
// the owner's, and everyone's when everyone's containers are bounded, so
// that two replicas cannot both count the same free place. (A count alone
// would not do: under PostgreSQL's read committed, two transactions that
// each count before the other inserts both see room.)
func (s State) HoldPlace(ctx context.Context, owner, id string, most state.Most, now time.Time) error {
	var full *state.FullError
	err := pgx.BeginTxFunc(ctx, s.db.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if most.All > 0 {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, 0)", int32(placesLock)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", int32(ownerPlacesLock), int32(hash64(owner))); err != nil {
			return err
		}
		// Each statement from here reads what was committed before it,
		// the last holder of the lock's place included.
		if _, err := tx.Exec(ctx, "DELETE FROM container_places WHERE held_at < $1", now.Add(-state.PlaceLifetime)); err != nil {
			return err
		}
		var mine, all int
		err := tx.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM (SELECT id FROM containers WHERE owner = $1 UNION SELECT id FROM container_places WHERE owner = $1) m WHERE id <> $2),
			CASE WHEN $3 THEN (SELECT count(*) FROM (SELECT id FROM containers UNION SELECT id FROM container_places) a WHERE id <> $2) ELSE 0 END`,
			owner, id, most.All > 0).Scan(&mine, &all)
		if err != nil {
			return err
		}
		if most.Owner > 0 && mine >= most.Owner {
			full = &state.FullError{Held: mine}
			return full
		}
		if most.All > 0 && all >= most.All {
			full = &state.FullError{All: true, Held: all}
			return full
		}
		_, err = tx.Exec(ctx, `INSERT INTO container_places (id, owner, held_at) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, held_at = excluded.held_at`, id, owner, now)
		return err
	})
	if full != nil {
		return full
	}
	if err != nil {
		return fmt.Errorf("hold a place for container %s in %s: %w", id, s.db.where, err)
	}
	return nil
}

func (s State) ReleasePlace(ctx context.Context, id string) error {
	if _, err := s.db.pool.Exec(ctx, "DELETE FROM container_places WHERE id = $1", id); err != nil {
		return fmt.Errorf("release the place of container %s in %s: %w", id, s.db.where, err)
	}
	return nil
}

// Secret makes the replicas' key if there is none, or reads the one there
// is, in one statement. Two replicas making it at once both insert; one
// waits for the other, and its statement, which began before the other's
// row was there, then sees none: it asks again.
func (s State) Secret(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh) // never fails (crypto/rand)
	for range 3 {
		var b []byte
		err := s.db.pool.QueryRow(ctx, `WITH made AS (
			INSERT INTO secrets (name, secret) VALUES ('replicas', $1) ON CONFLICT (name) DO NOTHING RETURNING secret)
			SELECT secret FROM made UNION ALL SELECT secret FROM secrets WHERE name = 'replicas'`, fresh).Scan(&b)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the replicas' secret in %s: %w", s.db.where, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("read the replicas' secret in %s: another replica was making it; try again", s.db.where)
}
