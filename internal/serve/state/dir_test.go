package state_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/terpdev/terp/internal/serve/state"
	"github.com/terpdev/terp/internal/serve/state/statetest"
)

func TestDir(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.State {
		d, err := state.OpenDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}, func(t *testing.T, st state.State) state.State {
		d, err := state.OpenDir(st.Where())
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}

// TestDirReadsOldFiles: files uploaded to the serve of the last release,
// whose created_at was Unix seconds, are still there.
func TestDirReadsOldFiles(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "files", "file-0123")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := `{"id":"file-0123","object":"file","bytes":3,"created_at":1764547200,"filename":"a.csv","purpose":"user_data","status":"processed","owner":"alice"}`
	if err := os.WriteFile(filepath.Join(old, "file.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := state.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.File(t.Context(), "alice", "file-0123")
	if err != nil || f.Filename != "a.csv" || f.CreatedAt.Unix() != 1764547200 {
		t.Fatalf("File = %+v, %v", f, err)
	}
}
