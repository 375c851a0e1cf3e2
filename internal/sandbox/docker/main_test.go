package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// testImage is the image the tests run: `make docker-test-image` builds it
// from Debian's packages, without any registry. TERP_TEST_DOCKER_IMAGE
// overrides it (e.g. with an image built from the README's Dockerfile).
func testImage() string {
	if img := os.Getenv("TERP_TEST_DOCKER_IMAGE"); img != "" {
		return img
	}
	return "terp-python:debian12"
}

var (
	reachOnce sync.Once
	reachErr  error
)

// newBackend returns a Backend for the test image on the daemon DOCKER_HOST
// names (the local socket by default). Without a daemon, or without the
// image, the test is skipped, loudly: those are the only reasons to skip.
func newBackend(tb testing.TB) *Backend {
	tb.Helper()
	b, err := New(Config{Image: testImage()})
	if err != nil {
		tb.Fatal(err)
	}
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := b.Ping(ctx); err != nil {
			reachErr = fmt.Errorf("DOCKER TESTS SKIPPED: no daemon at %s: %w", b.Host(), err)
			return
		}
		var se *SetupError
		if err := b.InspectImage(ctx); errors.As(err, &se) {
			reachErr = fmt.Errorf("DOCKER TESTS SKIPPED: the test image %s is missing; run `make docker-test-image` (or set TERP_TEST_DOCKER_IMAGE)", testImage())
		} else if err != nil {
			reachErr = err
		}
	})
	if reachErr != nil {
		fmt.Fprintln(os.Stderr, "\n*** "+reachErr.Error()+" ***")
		tb.Skip(reachErr.Error())
	}
	return b
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// create makes a sandbox that is removed when the test ends.
func create(tb testing.TB, b *Backend, opt sandbox.Options) *Sandbox {
	tb.Helper()
	sbx, err := b.Create(testCtx(tb), opt)
	if err != nil {
		tb.Fatalf("Create: %v", err)
	}
	tb.Cleanup(func() { _ = sbx.Close(context.Background()) })
	return sbx.(*Sandbox)
}
