package pod

import (
	"os"
	"strings"
	"testing"
)

// The pod backend runs the code as its own user and empties /work on
// Close, so it refuses to run where that would hurt: as root, or on a
// /work that is a directory of this machine rather than the pod's volume.
// What it does in a pod, the conformance suite checks through
// internal/sandbox/kubernetes/clustertest, in a bubblewrap namespace
// shaped like the pod.
func TestNewRefusesOutsideAPod(t *testing.T) {
	dir := t.TempDir()
	_, err := New(Config{Work: dir})
	want := "is not a mount point"
	if os.Geteuid() == 0 {
		want = "refusing to run the code as root"
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New with Work %s: %v, want an error saying %q", dir, err, want)
	}
}

func TestParentOf(t *testing.T) {
	if got := parentOf(os.Getpid()); got != os.Getppid() {
		t.Errorf("parentOf(self) = %d, want %d", got, os.Getppid())
	}
	if got := parentOf(-1); got != 0 {
		t.Errorf("parentOf(-1) = %d, want 0", got)
	}
}

func TestMountPoint(t *testing.T) {
	if ok, err := mountPoint("/"); err != nil || !ok {
		t.Errorf("mountPoint(/) = %v, %v", ok, err)
	}
	if ok, _ := mountPoint(t.TempDir()); ok {
		t.Error("a fresh temporary directory is a mount point")
	}
}
