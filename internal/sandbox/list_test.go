package sandbox

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Newest keeps the most recently modified files whatever order they come
// in, and says how many there were.
func TestNewestKeepsTheMostRecent(t *testing.T) {
	base := time.Unix(1e9, 0)
	for _, n := range []int{5, 10, 11, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var files []FileInfo
			for i := range n {
				files = append(files, FileInfo{Path: fmt.Sprintf("f%04d", i), ModTime: base.Add(time.Duration(i) * time.Second)})
			}
			rand.Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
			kept := NewNewest(10)
			for _, f := range files {
				kept.Add(f)
			}
			got, err := kept.Files()
			var cut *TruncatedError
			if n <= 10 {
				if err != nil || len(got) != n {
					t.Fatalf("%d files: kept %d, err %v", n, len(got), err)
				}
				return
			}
			if !errors.As(err, &cut) || !errors.Is(err, ErrListTruncated) || cut.Total != n || cut.Listed != 10 {
				t.Fatalf("%d files: err %v", n, err)
			}
			var names []string
			for _, f := range got {
				names = append(names, f.Path)
			}
			slices.Sort(names)
			for i, name := range names {
				if want := fmt.Sprintf("f%04d", n-10+i); name != want {
					t.Errorf("kept %v, want the 10 newest, f%04d and up", names, n-10)
					break
				}
			}
		})
	}
}
