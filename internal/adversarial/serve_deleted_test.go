package adversarial

import (
	"bytes"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// serveDeletedContainer uses the id of the container alice deleted in
// every request that names a container, and continues the response she
// made in it: each is refused, saying which id is gone, and the container
// is as gone as one that never was (same answer as a made-up id, not
// listed, its files off the disk), however it is asked for.
func serveDeletedContainer(t *testing.T, fx *serveFixture) {
	g := fx.g
	t.Run("uses", func(t *testing.T) {
		for _, p := range containerProbes(fx.deletedFile, fx.file) {
			t.Run(p.name, func(t *testing.T) {
				t.Parallel()
				got := refusedAlike(t, g, g.alice, fx.deleted, p)
				if e, ok := got.apiError(); ok && !strings.Contains(e.Message, fx.deleted) {
					t.Errorf("%s: %q does not name the container that is gone", p.name, e.Message)
				}
			})
		}
		t.Run("continue a response made in it", func(t *testing.T) {
			t.Parallel()
			r := g.as(t, g.alice, responseProbes()[2].req(fx.deletedResponse))
			e, ok := r.apiError()
			if r.status != http.StatusBadRequest && r.status != http.StatusNotFound || !ok {
				t.Fatalf("continuing %s: %d %s; want a 400 or 404", fx.deletedResponse, r.status, r.body)
			}
			if !strings.Contains(e.Message, fx.deletedResponse) && !strings.Contains(e.Message, fx.deleted) {
				t.Errorf("continuing %s: %q names neither the response nor its container", fx.deletedResponse, e.Message)
			}
		})
	})
	t.Run("not resurrected", func(t *testing.T) {
		alice := g.client(g.alice)
		cs, err := alice.Containers.List(sdkContext(t), openai.ContainerListParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs.Data {
			if c.ID == fx.deleted {
				t.Errorf("alice's list shows the deleted container %s again", c.ID)
			}
		}
		if r := g.as(t, g.alice, call{method: "GET", path: "/v1/containers/" + fx.deleted}); r.status != http.StatusNotFound {
			t.Errorf("the deleted container after every use of its id: %d %s", r.status, r.body)
		}
		// Its sandbox and the copy of its upload kept with its
		// conversation are removed with it; nothing is left to bring back.
		deadline := time.Now().Add(10 * time.Second)
		for {
			left := holding(g.data, fx.deletedSecret)
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the deleted container's file is still on the disk at %v", left)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// holding lists the files under dir that hold s.
func holding(dir, s string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err != nil || info.Size() > 1<<20 {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, p)
		}
		return nil
	})
	return out
}
