-- What the limits of terp serve count for every replica together, so that
-- a key's limit holds however many replicas serve it.

-- Each key's requests per minute, as a generic cell rate: tat is when the
-- key's bucket would be full again (its theoretical arrival time); a
-- request passes while that stays within a minute of now. Every request
-- writes its key's row, so the table is unlogged: a write waits for no WAL
-- flush (which costs a request milliseconds on a disk that syncs), and all
-- a crash of the database loses is the last minute's counts, as does a
-- failover (a standby has the table empty): each key may send a burst
-- again.
CREATE UNLOGGED TABLE request_rates (
	owner text PRIMARY KEY,
	tat   timestamptz NOT NULL
);

-- The containers being made, each holding its place under the container
-- limits until it is saved in containers; a place held longer than terp's
-- PlaceLifetime (its replica died) no longer counts.
CREATE TABLE container_places (
	id      text PRIMARY KEY,
	owner   text NOT NULL,
	held_at timestamptz NOT NULL
);

-- Random keys the replicas share: 'replicas' signs what one tells another
-- (a forwarded request it counted already).
CREATE TABLE secrets (
	name   text PRIMARY KEY,
	secret bytea NOT NULL
);
