package loadtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The soak's settings, from the environment (make soak passes them on).
var (
	// soakDuration is how long the clients go on starting conversations.
	soakDuration = envDuration("TERP_SOAK_DURATION", 10*time.Minute)
	// soakClients is how many conversations run at a time.
	soakClients = envInt("TERP_SOAK_CLIENTS", 16)
	// soakEvery is how often the server's processes are sampled.
	soakEvery = envDuration("TERP_SOAK_INTERVAL", 10*time.Second)
	// soakWarmup is how long the same load runs before the start is
	// measured. It is longer than cpuos.Server's exitGrace (a minute), for
	// which terp sandbox serve keeps an exited process that was not
	// collected: a start measured before that minute fills compares a
	// server without that bounded cache to one with it.
	soakWarmup = envDuration("TERP_SOAK_WARMUP", 90*time.Second)
)

// BenchmarkSoak runs soakClients clients for soakDuration, each having one
// conversation after another (the same three-step conversation as
// BenchmarkLoad) and deleting its container and response after each, as a
// client that is done does. Every soakEvery it logs terp serve's threads,
// open files, RSS and goroutines (when it exposes them), the sandbox
// processes and directories; and those of terp sandbox serve on cpuos.
//
// The start is measured after soakWarmup of the same load and the end
// after the last conversation, both with every container gone, so that
// both see a server at rest with its pools and caches as big as the load
// made them. The run fails on any failed conversation and on growth past
// soakTolerance: a leak of goroutines, files, sandboxes or memory grows
// with the conversations, and thousands of them outgrow any tolerance.
func BenchmarkSoak(b *testing.B) {
	heavy(b)
	for _, sbx := range []string{"local", "cpuos"} {
		b.Run(sbx, func(b *testing.B) { benchSoak(b, sbx) })
	}
}

func benchSoak(b *testing.B, sbx string) {
	ctx := context.Background()
	st := startStack(b, stackConfig{sandbox: sbx, keys: (soakClients + clientsPerKey - 1) / clientsPerKey, idlePause: idlePause})
	warm, _ := st.wave(ctx, 0, soakClients)
	failed(b, warm)
	for _, o := range warm {
		if err := st.cleanUp(ctx, o); err != nil {
			b.Fatal(err)
		}
	}

	var (
		next  atomic.Int64
		done  atomic.Int64
		mu    sync.Mutex
		outs  []outcome
		errs  []string
		nerrs int
	)
	next.Store(int64(soakClients))
	record := func(o outcome, err error) {
		mu.Lock()
		defer mu.Unlock()
		outs = append(outs, o)
		if err != nil {
			nerrs++
			if len(errs) < 10 {
				errs = append(errs, fmt.Sprintf("conversation %d: %v", o.id, err))
			}
		}
	}
	// converse has conversations one after another on soakClients clients
	// until the deadline, recording each.
	converse := func(deadline time.Time) {
		var clients sync.WaitGroup
		for range soakClients {
			clients.Go(func() {
				for time.Now().Before(deadline) {
					o := st.converse(ctx, int(next.Add(1)))
					err := o.err
					if cerr := st.cleanUp(ctx, o); err == nil {
						err = cerr
					}
					record(o, err)
					done.Add(1)
				}
			})
		}
		clients.Wait()
	}
	converse(time.Now().Add(soakWarmup))
	say("warm-up on --sandbox %s: %d conversations in %v", sbx, len(outs), soakWarmup)
	if nerrs > 0 {
		b.Fatalf("ERRORS: %d of %d warm-up conversations failed:\n%s", nerrs, len(outs), strings.Join(errs, "\n"))
	}
	outs, errs = nil, nil
	done.Store(0)

	start := st.settle(ctx, b, time.Minute)
	say("soak on --sandbox %s: %d clients for %v, sampled every %v, prewarm %q", sbx, soakClients, soakDuration, soakEvery, prewarm)
	say("%s", sampleHeader)
	say("%s", sampleLine(0, 0, start))

	began := time.Now()
	b.ResetTimer()
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(soakEvery)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				say("%s", sampleLine(time.Since(began), done.Load(), st.snapshot(ctx)))
			}
		}
	})
	converse(began.Add(soakDuration))
	close(stopSampling)
	sampler.Wait()
	wall := time.Since(began)
	b.StopTimer()
	end := st.settle(ctx, b, time.Minute)
	say("%s", sampleLine(wall, done.Load(), end))
	if nerrs > 0 {
		b.Errorf("ERRORS: %d of %d conversations failed:\n%s", nerrs, done.Load(), strings.Join(errs, "\n"))
	}

	count := float64(len(outs))
	lat := durations(outs, func(o outcome) time.Duration { return o.latency })
	added := durations(outs, outcome.added)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(count, "conversations")
	b.ReportMetric(count/wall.Seconds(), "conv/s")
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
	b.ReportMetric(ms(percentile(added, 50)), "added-p50-ms")
	b.ReportMetric(ms(percentile(added, 99)), "added-p99-ms")
	b.ReportMetric(float64(nerrs), "errors")
	say("%d conversations in %v (%.2f/s); latency p50 %s p99 %s; the gateway adds p50 %s p99 %s",
		len(outs), wall.Round(time.Second), count/wall.Seconds(), round(percentile(lat, 50)), round(percentile(lat, 99)),
		round(percentile(added, 50)), round(percentile(added, 99)))
	for _, g := range soakGrowth(start, end, st.sandboxes != nil) {
		verdict := "ok"
		if !g.ok() {
			verdict = "GROWTH"
			b.Errorf("%s grew from %s to %s over the soak, more than the %s allowed", g.name, g.format(g.start), g.format(g.end), g.format(g.allowed))
		}
		rate := ""
		if g.bytes && count > 0 {
			rate = fmt.Sprintf(" (%+.1f KiB per conversation)", float64(g.end-g.start)/1024/count)
		}
		say("%-20s start %10s  end %10s  allowed +%s  %s%s", g.name, g.format(g.start), g.format(g.end), g.format(g.allowed), verdict, rate)
	}
}

// say prints a line of the soak's report as it happens, indented as a
// benchmark's log is. The testing package keeps only the first ten lines
// of a benchmark's log when it passes, and a soak has a sample line every
// few seconds for minutes; printed at once they also show it going on.
func say(format string, a ...any) { fmt.Printf("    "+format+"\n", a...) }

// sampleHeader heads the soak's samples: terp serve's RSS, threads, open
// files and goroutines ("-": not exposed), the sandboxes' processes and
// directories, and terp sandbox serve's RSS, threads and files (cpuos).
const sampleHeader = "    time  convs | serve RSS  thr  fds  gor | sbx procs  dirs | sandbox-serve RSS  thr  fds"

func sampleLine(at time.Duration, done int64, s snapshot) string {
	g := "-"
	if s.goroutines >= 0 {
		g = fmt.Sprint(s.goroutines)
	}
	return fmt.Sprintf("%8s  %5d | %9s  %3d  %3d  %3s | %9d  %4d | %17s  %3d  %3d",
		at.Round(time.Second), done, mibs(s.gateway.RSS), s.threads, s.fds, g, s.procs, s.dirs, mibs(s.server.RSS), s.serverThreads, s.serverFDs)
}

// growth is one quantity compared between the soak's start and its end.
type growth struct {
	name                string
	start, end, allowed int64
	// bytes formats the numbers as MiB.
	bytes bool
}

func (g growth) ok() bool { return g.end-g.start <= g.allowed }

func (g growth) format(n int64) string {
	if g.bytes {
		return mibs(n)
	}
	return fmt.Sprint(n)
}

// soakTolerance is how much each quantity may grow between the start and
// the end of a soak, both at rest, without failing it: a count may grow by
// the larger of a few and a fraction of where it started, memory by 8 MiB
// and a fifth. The slack is for what a server at rest still varies in:
// idle keep-alive connections come and go (file descriptors), the Go
// runtime keeps the threads it ever needed and returns freed memory to the
// kernel lazily. Sandbox processes and directories must be back where
// they were, exactly.
func soakTolerance(name string, start int64) int64 {
	switch name {
	case "goroutines", "open files", "server open files":
		return max(10, start/10)
	case "threads", "server threads":
		return max(8, start/4)
	case "RSS", "server RSS":
		return 8*mib + start/5
	default:
		return 0
	}
}

// soakGrowth compares start with end: terp serve's goroutines (when both
// were measured), threads, open files and RSS, the sandbox processes and
// directories, and on cpuos terp sandbox serve's threads, files and RSS.
func soakGrowth(start, end snapshot, server bool) []growth {
	var out []growth
	add := func(name string, s, e int64, bytes bool) {
		out = append(out, growth{name: name, start: s, end: e, allowed: soakTolerance(name, s), bytes: bytes})
	}
	if start.goroutines >= 0 && end.goroutines >= 0 {
		add("goroutines", int64(start.goroutines), int64(end.goroutines), false)
	}
	add("threads", int64(start.threads), int64(end.threads), false)
	add("open files", int64(start.fds), int64(end.fds), false)
	add("RSS", start.gateway.RSS, end.gateway.RSS, true)
	add("sandbox processes", int64(start.procs), int64(end.procs), false)
	add("sandbox directories", int64(start.dirs), int64(end.dirs), false)
	if server {
		add("server threads", int64(start.serverThreads), int64(end.serverThreads), false)
		add("server open files", int64(start.serverFDs), int64(end.serverFDs), false)
		add("server RSS", start.server.RSS, end.server.RSS, true)
	}
	return out
}
