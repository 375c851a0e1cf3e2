package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/terptest"
)

// helloWorld is the yardstick of BenchmarkStartup: the least a Go program
// pays to start, print a line and exit on this machine.
const helloWorld = `package main

import "fmt"

func main() { fmt.Println("hello, world") }
`

// BenchmarkStartup runs `terp version` and a Go hello world one after the
// other, b.N times each, and reports the median of each and their ratio.
// Both are measured in the same run, alternating, so a machine busy with
// something else slows both alike; the median leaves out the runs a
// neighbour's burst hit. What terp pays beyond the hello world is mostly
// the initialisation of every package it links, which every command pays,
// whether it draws a terminal UI or serves HTTP:
//
//	go test -run '^$' -bench Startup -benchtime 200x ./cmd/terp/
//	GODEBUG=inittrace=1 terp version 2>&1 | sort -k5 -n  # which packages
func BenchmarkStartup(b *testing.B) {
	terp := terptest.Binary(b)
	hello := buildHelloWorld(b)
	var terpTimes, helloTimes []time.Duration
	for b.Loop() {
		helloTimes = append(helloTimes, timeRun(b, hello))
		terpTimes = append(terpTimes, timeRun(b, terp, "version"))
	}
	t, h := median(terpTimes), median(helloTimes)
	b.ReportMetric(float64(t.Microseconds())/1000, "terp-ms")
	b.ReportMetric(float64(h.Microseconds())/1000, "hello-ms")
	b.ReportMetric(float64(t)/float64(h), "terp/hello")
}

func buildHelloWorld(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module hello\n\ngo 1.26\n",
		"main.go": helloWorld,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.CommandContext(context.Background(), "go", "build", "-o", "hello", ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return filepath.Join(dir, "hello")
}

// timeRun runs a program to its end and returns how long that took, from
// the fork to the exit seen by the waiting parent.
func timeRun(b *testing.B, path string, args ...string) time.Duration {
	b.Helper()
	cmd := exec.CommandContext(context.Background(), path, args...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", path, err, out)
	}
	return time.Since(start)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
