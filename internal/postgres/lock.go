package postgres

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terpdev/terp/internal/store"
)

// locker holds a DB's conversation locks: session-level advisory locks,
// pg_try_advisory_lock with a 64-bit hash of the schema and the
// conversation's id, all on one connection of its own, outside the pool.
// The server releases a session's locks when the session ends, so a terp
// process that dies, however it dies (SIGKILL, a machine that loses
// power: the server sees the connection close or time out), never leaves
// a conversation locked, as the directory's flock never does.
//
// The connection can also end while the process lives: the server
// restarts, the network drops, an administrator terminates the backend.
// Its locks are then gone, and another replica may take them. The locker
// finds out on its next use, or within checkEvery by pinging while it
// holds locks; it logs that the locks were lost, connects again and takes
// each back. One another process took meanwhile cannot be taken back: that
// is logged as an error, since two processes may then run the conversation
// (the holder here is not told; its Unlock does nothing).
//
// Advisory locks of one session stack rather than conflict, so the
// locker also keeps which ids it holds, and refuses a second Lock of one
// in this process as another process's would be refused.
type locker struct {
	db  *DB
	cfg *pgx.ConnConfig
	// app is the connection's application_name: the pid and host named
	// to a replica whose Lock is refused.
	app string

	mu     sync.Mutex
	conn   *pgx.Conn // nil until the first Lock, and after it was lost
	held   map[int64]*convLock
	closed bool
	down   bool // a reconnect failed; logged once per outage

	stop chan struct{}
	done chan struct{}
}

// checkEvery is how often a locker holding locks checks its connection.
var checkEvery = 10 * time.Second

func newLocker(db *DB, cfg *pgx.ConnConfig) *locker {
	host, _ := os.Hostname()
	l := &locker{
		db: db, cfg: cfg.Copy(), app: fmt.Sprintf("terp pid %d on %s", os.Getpid(), host),
		held: map[int64]*convLock{}, stop: make(chan struct{}), done: make(chan struct{}),
	}
	go l.watch(checkEvery)
	return l
}

// convLock is one conversation held.
type convLock struct {
	l   *locker
	id  string
	key int64
}

// lockKey is the advisory lock's key for conversation id. The schema is in
// it because advisory locks are per database, and two terps may keep their
// tables in two schemas of one database.
func (l *locker) lockKey(id string) int64 {
	return int64(hash64("terp conversation", l.db.schema, id))
}

func (l *locker) lock(id string) (store.Lock, error) {
	key := l.lockKey(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, fmt.Errorf("lock conversation %s: the database %s is closed", id, l.db.where)
	}
	if _, ok := l.held[key]; ok {
		return nil, busy(id, fmt.Sprintf("this terp process (pid %d)", os.Getpid()))
	}
	var ok bool
	err := l.query(func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok)
	})
	if err != nil {
		return nil, fmt.Errorf("lock conversation %s in %s: %w", id, l.db.where, err)
	}
	if !ok {
		return nil, busy(id, l.holder(key))
	}
	cl := &convLock{l: l, id: id, key: key}
	l.held[key] = cl
	return cl, nil
}

func busy(id, holder string) error {
	return fmt.Errorf("%w: conversation %s is open in %s; wait for it to finish or quit it", store.ErrBusy, id, holder)
}

// query runs fn on the connection, connecting first when there is none,
// and once more on a new connection when the one it had turns out to be
// gone. l.mu is held.
func (l *locker) query(fn func(ctx context.Context, conn *pgx.Conn) error) error {
	for try := 0; ; try++ {
		if err := l.ensure(); err != nil {
			return err
		}
		ctx, cancel := op()
		err := fn(ctx, l.conn)
		cancel()
		if err == nil || !l.conn.IsClosed() || try > 0 {
			return err
		}
		l.lost(err)
	}
}

// holder names the process that holds key; l.mu is held.
func (l *locker) holder(key int64) string {
	var who string
	_ = l.query(func(ctx context.Context, conn *pgx.Conn) error {
		who = holderOn(ctx, conn, key)
		return nil
	})
	return who
}

// holderOn names the process that holds key, from the application_name of
// its session: "another terp process (pid PID on HOST)".
func holderOn(ctx context.Context, conn *pgx.Conn, key int64) string {
	var app string
	err := conn.QueryRow(ctx, `SELECT coalesce(a.application_name, '')
		FROM pg_locks k JOIN pg_stat_activity a ON a.pid = k.pid
		WHERE k.locktype = 'advisory' AND k.granted AND k.objsubid = 1 AND k.classid = $1 AND k.objid = $2
			AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		LIMIT 1`, uint32(uint64(key)>>32), uint32(key)).Scan(&app)
	if rest, ok := strings.CutPrefix(app, "terp "); err == nil && ok {
		return "another terp process (" + rest + ")"
	}
	return "another terp process"
}

// ensure connects when there is no connection, and then takes back the
// locks held before it was lost; l.mu is held.
func (l *locker) ensure() error {
	if l.conn != nil && !l.conn.IsClosed() {
		return nil
	}
	if l.conn != nil {
		l.lost(nil)
	}
	cfg := l.cfg.Copy()
	cfg.RuntimeParams["application_name"] = l.app
	ctx, cancel := op()
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		if !l.down && len(l.held) > 0 {
			l.db.log.Error("cannot reconnect to PostgreSQL to take back conversation locks; retrying", "db", l.db.where, "err", err)
		}
		l.down = true
		return connectError(l.db.where, l.cfg, err)
	}
	l.conn, l.down = conn, false
	for key, cl := range l.held {
		var ok bool
		err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok)
		switch {
		case err != nil:
			// The new connection failed too: keep what is held for the
			// next try.
			_ = conn.Close(ctx)
			l.conn = nil
			return fmt.Errorf("take back the lock of conversation %s: %w", cl.id, err)
		case ok:
			l.db.log.Info("took back the lock of a conversation after reconnecting to PostgreSQL", "conversation", cl.id, "db", l.db.where)
		default:
			delete(l.held, key)
			l.db.log.Error("lost the lock of a conversation with the connection to PostgreSQL, and another process holds it now: two may run it",
				"conversation", cl.id, "holder", holderOn(ctx, conn, key), "db", l.db.where)
		}
	}
	return nil
}

// lost forgets a connection that is gone, and with it the server's side of
// every lock held; the locks stay in held until ensure takes them back.
// l.mu is held.
func (l *locker) lost(err error) {
	if len(l.held) > 0 {
		ids := make([]string, 0, len(l.held))
		for _, cl := range l.held {
			ids = append(ids, cl.id)
		}
		l.db.log.Warn("the connection holding conversation locks to PostgreSQL is gone, and so are the locks; reconnecting to take them back",
			"conversations", strings.Join(ids, ","), "db", l.db.where, "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = l.conn.Close(ctx)
	cancel()
	l.conn = nil
}

// watch checks the connection every checkEvery while locks are held, so a
// lost connection is found, and its locks taken back, without waiting for
// the next Lock.
func (l *locker) watch(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.check()
		}
	}
}

func (l *locker) check() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || len(l.held) == 0 {
		return
	}
	if l.conn != nil && !l.conn.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := l.conn.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		l.lost(err)
	}
	_ = l.ensure() // logged there; tried again next time
}

// close releases every lock and ends the connection.
func (l *locker) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// Closing alone frees the locks once the server has seen the
		// connection go; unlocking first frees them before Close returns.
		_, _ = l.conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
		_ = l.conn.Close(ctx)
		cancel()
		l.conn = nil
	}
	clear(l.held)
}

// Unlock releases the conversation. A lock lost with its connection and
// not taken back is released already: Unlock does nothing.
func (cl *convLock) Unlock() error {
	l := cl.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[cl.key] != cl {
		return nil
	}
	delete(l.held, cl.key)
	if l.conn == nil || l.conn.IsClosed() {
		return nil // gone with the connection, and not to be taken back
	}
	ctx, cancel := op()
	defer cancel()
	var ok bool
	err := l.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", cl.key).Scan(&ok)
	switch {
	case err != nil && l.conn.IsClosed():
		l.lost(err)
		return nil
	case err != nil:
		return fmt.Errorf("unlock conversation %s in %s: %w", cl.id, l.db.where, err)
	case !ok:
		return fmt.Errorf("unlock conversation %s in %s: the server did not hold its lock", cl.id, l.db.where)
	}
	return nil
}
