package agent

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// How the agent knows what is in /work, and how much of it it shows.
//
// Telling which files a step saved needs the whole of /work: a file missed by
// the listing is never reported and never downloaded. Sandbox.List may stop
// early, though (the local backend stops at 10,000 entries, without saying
// so), so a listing that is large is not trusted: the agent walks /work in
// the sandbox itself (walk.py), which has no cap.
//
// What is shown is another matter: the names of 20,000 files are of no use
// to the model or the user, and would fill the context. Lists of files are
// cut to a few dozen names, with the count of all of them, and the names
// kept are the ones that stand out (see shown).

// walkAbove is the size of a listing from which List is not trusted to be
// complete. It is far below any backend's cap, and walking a /work this
// large costs a small fraction of a step.
const walkAbove = 1000

//go:embed walk.py
var walkPy string

// Bounds of the output of walk.py: it starts small, and once it is known to
// be larger, the walk is run again with room for all of it.
const (
	walkOutput    = 4 << 20
	maxWalkOutput = 512 << 20
)

// list returns every regular file under /work. A /work that was large at
// the last look is walked at once, without asking List first. When the walk
// fails, List's files are used and a.listProblem says so, for the user and
// the model: files may then be missed, but not silently.
func (a *Agent) list(ctx context.Context) ([]sandbox.FileInfo, error) {
	var files []sandbox.FileInfo
	if !a.large {
		var err error
		files, err = a.sbx.List(ctx, sandbox.WorkDir)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", sandbox.WorkDir, err)
		}
		if len(files) < walkAbove {
			return files, nil
		}
	}
	all, err := walk(ctx, a.sbx)
	switch {
	case err == nil:
		a.large = len(all) >= walkAbove
		return all, nil
	case ctx.Err() != nil:
		return nil, err
	}
	a.large = false
	if files == nil {
		if files, err = a.sbx.List(ctx, sandbox.WorkDir); err != nil {
			return nil, fmt.Errorf("list %s: %w", sandbox.WorkDir, err)
		}
	}
	a.listProblem = fmt.Sprintf("terp could not list all of %s (%s files or more; walking them in the sandbox failed: %v): "+
		"files saved in this step may be missing from the list and the downloads. Remove files the code no longer needs.",
		sandbox.WorkDir, commas(len(files)), err)
	return files, nil
}

// ListAll returns every regular file under /work of sbx, as the agent sees
// it: Sandbox.List when that is small, else a walk in the sandbox, which
// has no cap. Front-ends that list /work for the user use it, so that they
// do not stop at a backend's cap either.
func ListAll(ctx context.Context, sbx sandbox.Sandbox) ([]sandbox.FileInfo, error) {
	a := &Agent{sbx: sbx}
	files, err := a.list(ctx)
	if err == nil && a.listProblem != "" {
		err = errors.New(a.listProblem)
	}
	return files, err
}

// walk lists /work with walk.py, run in the sandbox.
func walk(ctx context.Context, sbx sandbox.Sandbox) ([]sandbox.FileInfo, error) {
	limit := walkOutput
	for {
		res, err := sbx.Exec(ctx, []string{"python3", "-I", "-S", "-c", walkPy, sandbox.WorkDir},
			sandbox.ExecOptions{Timeout: 2 * time.Minute, MaxStdout: limit, MaxStderr: 4 << 10})
		switch {
		case err != nil:
			return nil, err
		case res.ExitCode != 0:
			return nil, fmt.Errorf("walk.py exited %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
		case res.StdoutBytes > int64(limit) && limit < maxWalkOutput:
			limit = int(min(res.StdoutBytes+res.StdoutBytes/4, maxWalkOutput))
			continue
		case res.StdoutBytes > int64(limit):
			return nil, fmt.Errorf("the listing is over %d MiB", maxWalkOutput>>20)
		}
		return parseWalk(res.Stdout)
	}
}

// parseWalk reads walk.py's lines: the path in hex (names may hold any byte
// but NUL and "/", and the output is read as UTF-8), size, mode, mtime in
// nanoseconds.
func parseWalk(out string) ([]sandbox.FileInfo, error) {
	var files []sandbox.FileInfo
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 4 {
			return nil, fmt.Errorf("walk.py: bad line %q", line)
		}
		name, err1 := hex.DecodeString(f[0])
		size, err2 := strconv.ParseInt(f[1], 10, 64)
		mode, err3 := strconv.ParseUint(f[2], 10, 32)
		mtime, err4 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			return nil, fmt.Errorf("walk.py: bad line %q", line)
		}
		files = append(files, sandbox.FileInfo{Path: string(name), Size: size, Mode: fs.FileMode(mode), ModTime: time.Unix(0, mtime)})
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
