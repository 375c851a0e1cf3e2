-- terp's tables: terp serve's state (files, containers, responses, token
-- usage) and the conversation store (conversations and the uploads kept
-- with them). Content is kept in rows of at most 1 MiB (chunks), so that no
-- statement moves a whole file and a download streams. Records whose shape
-- belongs to Go (a container, a conversation) are kept whole as JSON text,
-- with the columns that are queried beside them; json, not jsonb, keeps the
-- text as written.

CREATE TABLE files (
	id         text PRIMARY KEY,
	owner      text NOT NULL,
	filename   text NOT NULL,
	purpose    text NOT NULL,
	bytes      bigint NOT NULL,
	created_at timestamptz NOT NULL
);
CREATE INDEX files_by_owner ON files (owner, created_at DESC, id);

CREATE TABLE file_chunks (
	file_id text NOT NULL REFERENCES files (id) ON DELETE CASCADE,
	seq     integer NOT NULL,
	data    bytea NOT NULL,
	PRIMARY KEY (file_id, seq)
);
-- Uploads are often compressed already: store chunks out of line, as they are.
ALTER TABLE file_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE TABLE containers (
	id         text PRIMARY KEY,
	owner      text NOT NULL,
	created_at timestamptz NOT NULL,
	record     json NOT NULL
);
CREATE INDEX containers_by_owner ON containers (owner, created_at DESC, id);

CREATE TABLE responses (
	id         text PRIMARY KEY,
	owner      text NOT NULL,
	container  text NOT NULL,
	created_at timestamptz NOT NULL,
	object     json NOT NULL,
	history    json NOT NULL
);
CREATE INDEX responses_by_owner ON responses (owner, created_at, id);

CREATE TABLE token_usage (
	owner  text NOT NULL,
	day    text NOT NULL,
	tokens bigint NOT NULL,
	PRIMARY KEY (owner, day)
);

CREATE TABLE conversations (
	id      text PRIMARY KEY,
	updated timestamptz NOT NULL,
	record  json NOT NULL
);
CREATE INDEX conversations_by_updated ON conversations (updated DESC, id);

-- An upload kept with a conversation. Replacing one makes a new row (a new
-- id): a reader streaming the old one's chunks never reads a mix.
CREATE TABLE inputs (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	conversation text NOT NULL,
	name         text NOT NULL,
	bytes        bigint NOT NULL,
	UNIQUE (conversation, name)
);

CREATE TABLE input_chunks (
	input bigint NOT NULL REFERENCES inputs (id) ON DELETE CASCADE,
	seq   integer NOT NULL,
	data  bytea NOT NULL,
	PRIMARY KEY (input, seq)
);
ALTER TABLE input_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
