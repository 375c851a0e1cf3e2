package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/terpdev/terp/internal/sandbox"
)

// How the agent knows what is in /work, and how much of it it shows.
//
// Telling which files a step saved needs every file the step changed: a file
// missed by the listing is never reported and never downloaded. Sandbox.List
// holds at most sandbox.MaxListEntries files, but those it keeps are the most
// recently modified, so a step's new files are among them however many old
// ones /work holds; that older files went unlisted is said, to the user and
// the model.
//
// What is shown is another matter: the names of 20,000 files are of no use
// to the model or the user, and would fill the context. Lists of files are
// cut to a few dozen names, with the count of all of them, and the names
// kept are the ones that stand out (see shown).

// list returns the regular files under /work; when List had to cut the
// listing, a.listProblem says so for the next tool result.
func (a *Agent) list(ctx context.Context) ([]sandbox.FileInfo, error) {
	files, err := a.sbx.List(ctx, sandbox.WorkDir)
	var cut *sandbox.TruncatedError
	switch {
	case errors.As(err, &cut):
		a.listProblem = fmt.Sprintf("%s holds %s files; terp looks at the %s most recently modified, so files this step "+
			"saved are all seen, but older files may be missing from lists. Remove files the code no longer needs.",
			sandbox.WorkDir, commas(cut.Total), commas(cut.Listed))
	case err != nil:
		return nil, fmt.Errorf("list %s: %w", sandbox.WorkDir, err)
	}
	return files, nil
}

// Bounds of a list of files shown to the model or the user.
const (
	maxShown      = 50
	maxShownChars = 2000
)

// shown picks the names to show of files: at most maxShown, and at most
// maxShownChars in all. When not all fit, the files that stand out are
// kept first: those with few others in the same directory with the same
// extension, so that the one result.csv saved beside 20,000 part files is
// named. The names keep the order of files.
func shown(files []sandbox.FileInfo) []string {
	if len(files) <= maxShown {
		n := 0
		for _, f := range files {
			n += len(f.Path)
		}
		if n <= maxShownChars {
			names := make([]string, len(files))
			for i, f := range files {
				names[i] = f.Path
			}
			return names
		}
	}
	group := func(p string) string { return path.Dir(p) + "\x00" + path.Ext(p) }
	sizes := map[string]int{}
	for _, f := range files {
		sizes[group(f.Path)]++
	}
	order := make([]int, len(files))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		return cmp.Compare(sizes[group(files[i].Path)], sizes[group(files[j].Path)])
	})
	var keep []int
	chars := 0
	for _, i := range order {
		if len(keep) == maxShown || chars+len(files[i].Path) > maxShownChars {
			break
		}
		keep = append(keep, i)
		chars += len(files[i].Path)
	}
	slices.Sort(keep)
	names := make([]string, len(keep))
	for k, i := range keep {
		names[k] = files[i].Path
	}
	return names
}

// filesNote says how many files there were when only some are named, or
// "" when all are.
func filesNote(all, named int) string {
	if named >= all {
		return ""
	}
	return fmt.Sprintf("%s files saved; %s are named here, %s are not. Find them with code (os.listdir, glob) "+
		"rather than printing all their names.", commas(all), commas(named), commas(all-named))
}
