package loadtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// loadSizes are the numbers of conversations BenchmarkLoad runs at once:
// how the cost grows from 8 to 64 to 256.
var loadSizes = []int{8, 64, 256}

// clientsPerKey is how many of a wave's clients share one API key: terp
// serve allows a key 64 live containers, and every conversation of a wave
// keeps its own until the wave is measured.
const clientsPerKey = 32

// BenchmarkLoad runs waves of N concurrent conversations through terp serve,
// each one POST /v1/responses that the model answers in three replies of
// 300 ms (code that sets a variable, code that prints twice it, an answer
// with what it printed), on the local backend and through terp sandbox
// serve. One iteration is one wave; run it with -benchtime 1x (make
// loadtest). Any failed conversation fails the run.
//
// Reported per sub-benchmark:
//
//   - conv/s: conversations per second of the wave's wall time, from the
//     first request to the last answer;
//   - p50-ms, p99-ms: each request's latency at the client;
//   - added-p50-ms, added-p99-ms: what the gateway adds to a request, its
//     latency less the time the model spent on its three replies (from
//     reading each request to having its reply ready, 300 ms and a
//     little): terp serve's own work, the sandbox's creation and the
//     code's runs, and the HTTP to and from the model. The log breaks it
//     into before the first reply, between replies and after the last;
//   - cpu-ms/conv: the CPU time of terp serve (and terp sandbox serve) and
//     of every sandbox process, per conversation, from before the wave
//     until its containers are deleted;
//   - MiB/container: the memory (PSS) of terp serve, terp sandbox serve
//     and the sandboxes' processes once the wave has answered, less what
//     they held before it, per container;
//   - MiB/paused: the same once every container has paused (idle_pause,
//     TERP_LOAD_IDLE_PAUSE, 30 s by default).
//
// Before the waves one conversation warms the server up, so that what only
// the first costs (the backend's check of the machine, the runtime's
// first growth) is not counted per container.
func BenchmarkLoad(b *testing.B) {
	heavy(b)
	for _, sbx := range []string{"local", "cpuos"} {
		b.Run(sbx, func(b *testing.B) {
			for _, n := range loadSizes {
				b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchLoad(b, sbx, n) })
			}
		})
	}
}

func benchLoad(b *testing.B, sbx string, n int) {
	ctx := context.Background()
	st := startStack(b, stackConfig{sandbox: sbx, keys: (n + clientsPerKey - 1) / clientsPerKey, idlePause: idlePause})
	warm := st.converse(ctx, 0)
	failed(b, []outcome{warm})
	if err := st.cleanUp(ctx, warm); err != nil {
		b.Fatal(err)
	}

	var all []outcome
	var wall, cpu time.Duration
	var live, paused, liveGateway, liveSandboxes int64
	next := 1
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		base := st.settle(ctx, b, time.Minute)
		b.StartTimer()
		outs, w := st.wave(ctx, next, n)
		b.StopTimer()
		next += n
		full := st.snapshot(ctx)
		failed(b, outs)
		if first := slices.MinFunc(outs, func(x, y outcome) int { return x.end.Compare(y.end) }); full.at.Sub(first.end) > idlePause-time.Second {
			b.Fatalf("the wave took so long that its first containers may have paused (idle_pause %v) before its memory was read; raise TERP_LOAD_IDLE_PAUSE", idlePause)
		}
		rest := st.settle(ctx, b, idlePause+time.Minute)
		for _, o := range outs {
			if err := st.cleanUp(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		gone := st.settle(ctx, b, time.Minute)
		if gone.dirs != base.dirs {
			b.Fatalf("%d sandbox directories in %s after the wave's containers were deleted, %d before it", gone.dirs, st.sandboxRoot, base.dirs)
		}
		b.Logf("wave of %d: %d processes below the sandboxes' runner (%s), %d before", n, full.procs, full.comms, base.procs)
		all = append(all, outs...)
		wall += w
		cpu += gone.cpu - base.cpu
		live += full.total().PSS - base.total().PSS
		liveGateway += full.gateway.PSS - base.gateway.PSS
		liveSandboxes += full.sandboxes.PSS + full.server.PSS - base.sandboxes.PSS - base.server.PSS
		paused += rest.total().PSS - base.total().PSS
		b.StartTimer()
	}
	b.StopTimer()
	count := float64(len(all))
	lat := durations(all, func(o outcome) time.Duration { return o.latency })
	added := durations(all, outcome.added)
	before := durations(all, func(o outcome) time.Duration { return o.before })
	between := durations(all, func(o outcome) time.Duration { return o.between })
	after := durations(all, func(o outcome) time.Duration { return o.after })
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(count/wall.Seconds(), "conv/s")
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
	b.ReportMetric(ms(percentile(added, 50)), "added-p50-ms")
	b.ReportMetric(ms(percentile(added, 99)), "added-p99-ms")
	b.ReportMetric(ms(cpu)/count, "cpu-ms/conv")
	b.ReportMetric(float64(live)/mib/count, "MiB/container")
	b.ReportMetric(float64(paused)/mib/count, "MiB/paused")
	b.ReportMetric(0, "errors")
	b.Logf("%d conversations on --sandbox %s, %d at a time, %d API keys, prewarm %q: %.2f conversations/s",
		len(all), sbx, n, len(st.keys), prewarm, count/wall.Seconds())
	b.Logf("latency p50 %s p99 %s; the gateway adds p50 %s p99 %s: before the first reply p50 %s p99 %s, between replies p50 %s p99 %s, after the last p50 %s p99 %s",
		round(percentile(lat, 50)), round(percentile(lat, 99)), round(percentile(added, 50)), round(percentile(added, 99)),
		round(percentile(before, 50)), round(percentile(before, 99)), round(percentile(between, 50)), round(percentile(between, 99)),
		round(percentile(after, 50)), round(percentile(after, 99)))
	b.Logf("memory (PSS) per live container %s (terp serve %s, sandbox processes and terp sandbox serve %s); per paused container %s",
		mibs(live/int64(count)), mibs(liveGateway/int64(count)), mibs(liveSandboxes/int64(count)), mibs(paused/int64(count)))
}

func durations(outs []outcome, f func(outcome) time.Duration) []time.Duration {
	d := make([]time.Duration, len(outs))
	for i, o := range outs {
		d[i] = f(o)
	}
	slices.Sort(d)
	return d
}

// percentile is the nearest-rank p-th percentile of sorted: with fewer
// than 100 values the 99th is the largest.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
