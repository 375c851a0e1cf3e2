-- The answers a removed container gave, by their digests, remembered for a
-- while so that a chat client that goes on from one is told its container
-- is gone (see terp serve's state.State.AddGone).

CREATE TABLE gone_answers (
	owner      text NOT NULL,
	digest     text NOT NULL,
	removed_at timestamptz NOT NULL,
	PRIMARY KEY (owner, digest)
);
