package loadtest

import (
	"os"
	"slices"
	"testing"
	"time"
)

// These run in make test; the benchmarks that use them do not.

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var d []time.Duration
		for _, n := range ns {
			d = append(d, time.Duration(n)*time.Millisecond)
		}
		return d
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      int
		want   time.Duration
	}{
		{"none", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median of eight is the fourth", ms(1, 2, 3, 4, 5, 6, 7, 8), 50, 4 * time.Millisecond},
		{"p99 of eight is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8), 99, 8 * time.Millisecond},
		{"p99 of 200 is the 198th", ms(seq(200)...), 99, 198 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%d) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

func TestSoakGrowth(t *testing.T) {
	rest := snapshot{goroutines: 40, threads: 30, fds: 12, gateway: procMem{RSS: 32 * mib}, server: procMem{RSS: 30 * mib},
		serverThreads: 24, serverFDs: 12}
	tests := []struct {
		name   string
		end    func(*snapshot)
		server bool
		// grew names the quantity that must fail; "" for none.
		grew string
	}{
		{"the same", func(*snapshot) {}, true, ""},
		{"idle connections and a few threads", func(s *snapshot) { s.fds += 10; s.threads += 8; s.goroutines += 10 }, true, ""},
		{"memory within 8 MiB and a fifth", func(s *snapshot) { s.gateway.RSS += 14 * mib }, false, ""},
		{"memory past it", func(s *snapshot) { s.gateway.RSS += 15 * mib }, false, "RSS"},
		{"a leaked file per few conversations", func(s *snapshot) { s.fds += 11 }, false, "open files"},
		{"goroutines", func(s *snapshot) { s.goroutines += 11 }, false, "goroutines"},
		{"one sandbox process left", func(s *snapshot) { s.procs++ }, false, "sandbox processes"},
		{"one sandbox directory left", func(s *snapshot) { s.dirs++ }, false, "sandbox directories"},
		{"the sandbox server's files", func(s *snapshot) { s.serverFDs += 20 }, true, "server open files"},
		{"the sandbox server is not compared on local", func(s *snapshot) { s.serverFDs += 20 }, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			end := rest
			tt.end(&end)
			var grew []string
			for _, g := range soakGrowth(rest, end, tt.server) {
				if !g.ok() {
					grew = append(grew, g.name)
				}
			}
			var want []string
			if tt.grew != "" {
				want = []string{tt.grew}
			}
			if !slices.Equal(grew, want) {
				t.Errorf("grew %q, want %q", grew, want)
			}
		})
	}
	t.Run("goroutines not exposed are not compared", func(t *testing.T) {
		end := rest
		end.goroutines = -1
		for _, g := range soakGrowth(rest, end, false) {
			if g.name == "goroutines" {
				t.Errorf("compared goroutines that were not measured: %+v", g)
			}
		}
	})
}

// The harness reads /proc as the benchmarks do: this process has memory,
// threads, open files and CPU time, and no children.
func TestProc(t *testing.T) {
	pid := os.Getpid()
	m, ok := memOf(pid)
	if !ok || m.RSS == 0 || m.PSS == 0 || m.PSS > m.RSS {
		t.Errorf("memOf = %+v, %v", m, ok)
	}
	if n := threadsOf(pid); n < 1 {
		t.Errorf("threadsOf = %d", n)
	}
	if n := fdsOf(pid); n < 3 {
		t.Errorf("fdsOf = %d", n)
	}
	if st, ok := statOf(pid); !ok || st.ppid != os.Getppid() {
		t.Errorf("statOf = %+v, %v; want the parent %d", st, ok, os.Getppid())
	}
	if d := descendants(pid); len(d) != 0 {
		t.Errorf("descendants = %v, want none", d)
	}
}
