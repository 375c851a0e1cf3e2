package serve_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/terpdev/terp/internal/postgres"
	"github.com/terpdev/terp/internal/postgres/pgtest"
	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
)

// BenchmarkAdmit measures what a key's requests per minute cost a request
// on its way through the host (key, limits, metrics, log) to a handler that
// does nothing: with no limit, counted in memory (the directory's state, one
// machine), and counted in PostgreSQL (shared by replicas; a real server,
// see pgtest). The limit is too high to refuse any. "serial" sends one
// request at a time; "parallel" 8 per core at once, all of one key, whose
// count in PostgreSQL is one row they take turns on; "parallel-keys" as
// many, each of one of 16 keys. See docs/benchmarks.md.
func BenchmarkAdmit(b *testing.B) {
	outer := b
	// A limit no run of the benchmark reaches: a billion a minute, a
	// bucket of a billion.
	const rpm = 1_000_000_000
	const key = "sk-bench-0123456789abcdef" // and -00 to -15
	var pg state.State                      // opened once, for the whole benchmark
	for _, tt := range []struct {
		name string
		rpm  int
		st   func(b *testing.B) state.State
	}{
		{"none", 0, dirState},
		{"memory", rpm, dirState},
		{"postgres", rpm, func(*testing.B) state.State {
			if pg == nil {
				db, err := postgres.Open(context.Background(), pgtest.URL(outer))
				if err != nil {
					outer.Fatal(err)
				}
				outer.Cleanup(db.Close)
				pg = db.State()
			}
			return pg
		}},
	} {
		for _, mode := range []string{"serial", "parallel", "parallel-keys"} {
			b.Run(tt.name+"/"+mode, func(b *testing.B) {
				keys := map[string]serve.Principal{}
				for i := range 16 {
					keys[fmt.Sprintf("%s-%02d", key, i)] = serve.Principal{Name: fmt.Sprint("bench", i), Limits: serve.Limits{RPM: tt.rpm}}
				}
				srv, err := serve.New(serve.Config{State: tt.st(b), DataDir: b.TempDir(), Keys: keys})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { srv.Close(context.Background()) })
				srv.Register(serve.Protocol{Name: "bench", Routes: []serve.Route{{Pattern: "GET /bench",
					Handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }}}})
				h := srv.Handler()
				do := func(i int) {
					r := httptest.NewRequest(http.MethodGet, "/bench", nil)
					r.Header.Set("Authorization", fmt.Sprintf("Bearer %s-%02d", key, i))
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusNoContent {
						b.Fatalf("%d %s", w.Code, w.Body)
					}
				}
				b.ResetTimer()
				if mode == "serial" {
					for range b.N {
						do(0)
					}
					return
				}
				var next atomic.Int32
				b.SetParallelism(8)
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					if mode == "parallel-keys" {
						i = int(next.Add(1)) % len(keys)
					}
					for pb.Next() {
						do(i)
					}
				})
			})
		}
	}
}

func dirState(b *testing.B) state.State {
	d, err := state.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	return d
}
