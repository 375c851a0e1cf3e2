package cli

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/terpdev/terp/internal/postgres"
	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/store"
)

// serveStores are where a server keeps its conversations and its state:
// nil for both means the data directory (the Factory's store, a state.Dir),
// for one server on one machine; a PostgreSQL database is shared by
// replicas.
type serveStores struct {
	conversations store.Store
	state         state.State
	close         func()
}

// openServeStores opens what --store names: "" is the data directory,
// postgres://... (or postgresql://) a database.
func openServeStores(ctx context.Context, opts *serveOptions) (*serveStores, error) {
	u := strings.TrimSpace(opts.store)
	switch {
	case u == "":
		return &serveStores{close: func() {}}, nil
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		db, err := postgres.Open(ctx, u)
		if err != nil {
			return nil, err
		}
		return &serveStores{conversations: db.Conversations(), state: db.State(), close: db.Close}, nil
	default:
		return nil, usagef("--store is a PostgreSQL URL (postgres://USER:PASSWORD@HOST:5432/DATABASE), or empty for the data directory; %q is neither", redactURL(u))
	}
}

// shared reports whether other replicas may share the stores.
func (s *serveStores) shared() bool { return s.state != nil }

// redactURL is u without its password, for messages.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an unreadable URL)"
	}
	return p.Redacted()
}

// replicaAddress is the address other replicas reach this one at: the
// --advertise URL, or the listen address when it names one host. A server
// on a wildcard address (0.0.0.0, [::]) cannot know which of its addresses
// the others reach, and must be told.
func replicaAddress(advertise string, ln net.Listener) (string, error) {
	if advertise != "" {
		u, err := url.Parse(advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return "", usagef("--advertise is this replica's base URL as the others reach it, such as http://10.0.0.5:8080; %q is not one", advertise)
		}
		return strings.TrimSuffix(advertise, "/"), nil
	}
	host, _, err := net.SplitHostPort(ln.Addr().String())
	if err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
			return "http://" + ln.Addr().String(), nil
		}
	}
	return "", usagef("replicas sharing --store forward requests to each other: give --advertise http://HOST:PORT, the address the others reach this one at (it listens on %s)", ln.Addr())
}

// describe names the stores for the start-up line.
func (s *serveStores) describe(dataDir string) string {
	if s.state != nil {
		return fmt.Sprintf("state in %s", s.state.Where())
	}
	return fmt.Sprintf("state in %s", dataDir)
}
