package docker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

// newBackend returns a Backend for the test image on the daemon DOCKER_HOST
// names (the local socket by default). The test is skipped, loudly, without
// a daemon or without the image (see terptest.DockerImage).
func newBackend(tb testing.TB) *Backend {
	tb.Helper()
	b, err := New(Config{Image: terptest.DockerImage(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// peer is a moby client of the tests' own, built from the same environment
// as the backend's client: the tests check through it, not through the code
// under test, what the daemon was told.
func peer(tb testing.TB) *client.Client {
	tb.Helper()
	cli, err := peerOnce()
	if err != nil {
		tb.Fatal(err)
	}
	return cli
}

var peerOnce = sync.OnceValues(func() (*client.Client, error) { return client.New(client.FromEnv) })

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
