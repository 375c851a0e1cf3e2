package state

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/fsext"
)

// Dir keeps the state in a directory, for one server on one machine:
//
//	files/ID/file.json, files/ID/content   an uploaded file
//	containers/ID.json                     a container's record
//	responses/OWNER/NANOS-ID.json          a stored response (OWNER in hex)
//	usage.json                             tokens per owner per day
//	gone.json                              answers of removed containers
//	secret                                 the servers' Secret
//
// Every record is written to a temporary file, synced and renamed over the
// old one, so a server killed at any moment leaves each record whole.
// Files and containers are also held in memory, read once at Open.
type Dir struct {
	dir string

	mu         sync.Mutex
	files      map[string]File
	containers map[string]Container
	usage      map[string]map[string]int64
	// gone are the remembered answers of removed containers: when each
	// was removed, by digest, by owner.
	gone map[string]map[string]time.Time

	// rateMu guards each key's bucket of requests per minute.
	rateMu  sync.Mutex
	buckets map[string]*bucket
	// placesMu guards the places held for containers being made, and the
	// secret. It is taken before mu, never after.
	placesMu sync.Mutex
	places   map[string]place
	secret   []byte
}

var _ State = (*Dir)(nil)

// OpenDir opens (creating) the state under dir.
func OpenDir(dir string) (*Dir, error) {
	d := &Dir{dir: dir, files: map[string]File{}, containers: map[string]Container{}, usage: map[string]map[string]int64{}, gone: map[string]map[string]time.Time{},
		buckets: map[string]*bucket{}, places: map[string]place{}}
	for _, sub := range []string{"files", "containers", "responses"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("open the server's state: %w", err)
		}
	}
	if err := d.load(); err != nil {
		return nil, fmt.Errorf("open the server's state in %s: %w", dir, err)
	}
	return d, nil
}

// load reads the files and containers. A record that cannot be read (an
// upload that never finished) is skipped: it spoils only itself.
func (d *Dir) load() error {
	entries, err := os.ReadDir(filepath.Join(d.dir, "files"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(d.dir, "files", e.Name(), "file.json"))
		if err != nil {
			continue
		}
		if f, ok := readFile(b); ok && f.ID == e.Name() {
			d.files[f.ID] = f
		}
	}
	entries, err = os.ReadDir(filepath.Join(d.dir, "containers"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(d.dir, "containers", e.Name()))
		if err != nil {
			continue
		}
		var c Container
		if json.Unmarshal(b, &c) == nil && c.ID+".json" == e.Name() {
			d.containers[c.ID] = c
		}
	}
	for name, v := range map[string]any{"usage.json": &d.usage, "gone.json": &d.gone} {
		b, err := os.ReadFile(filepath.Join(d.dir, name))
		if err == nil {
			if err := json.Unmarshal(b, v); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// readFile reads a file record, also in the format of terp 0.x's serve,
// whose created_at was Unix seconds.
func readFile(b []byte) (File, bool) {
	var f File
	if json.Unmarshal(b, &f) == nil {
		return f, true
	}
	var old struct {
		File
		CreatedAt int64 `json:"created_at"`
	}
	if json.Unmarshal(b, &old) != nil {
		return File{}, false
	}
	f = old.File
	f.CreatedAt = time.Unix(old.CreatedAt, 0)
	return f, true
}

// validID refuses ids that could name a path: they come from URLs.
var validID = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)
})

// Where is the state's directory.
func (d *Dir) Where() string { return d.dir }

// Close does nothing: every write is already on disk.
func (d *Dir) Close() error { return nil }

// Check writes and removes a file, to see that the directory is writable.
func (d *Dir) Check(context.Context) error {
	p := filepath.Join(d.dir, ".check")
	if err := writeAtomic(p, []byte("ok\n")); err != nil {
		return fmt.Errorf("the server's state in %s is not writable: %w", d.dir, err)
	}
	return os.Remove(p)
}

func (d *Dir) PutFile(_ context.Context, f File, content io.Reader, max int64) (File, error) {
	if !validID().MatchString(f.ID) {
		return f, fmt.Errorf("file id %q is not an id", f.ID)
	}
	dir := filepath.Join(d.dir, "files", f.ID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return f, err
	}
	n, err := writeContent(filepath.Join(dir, "content"), content, max)
	if err == nil {
		f.Bytes = n
		var b []byte
		if b, err = json.Marshal(f); err == nil {
			err = writeAtomic(filepath.Join(dir, "file.json"), b)
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return f, err
	}
	d.mu.Lock()
	d.files[f.ID] = f
	d.mu.Unlock()
	return f, nil
}

// writeContent copies r to path, refusing more than max bytes.
func writeContent(path string, r io.Reader, max int64) (int64, error) {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(r, max+1))
	if err == nil && n > max {
		err = ErrTooLarge
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func (d *Dir) File(_ context.Context, owner, id string) (File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.files[id]
	if !ok || f.Owner != owner {
		return File{}, ErrNotFound
	}
	return f, nil
}

func (d *Dir) OpenFile(_ context.Context, f File) (io.ReadCloser, error) {
	if !validID().MatchString(f.ID) {
		return nil, ErrNotFound
	}
	return os.Open(filepath.Join(d.dir, "files", f.ID, "content"))
}

func (d *Dir) Files(_ context.Context, owner string) ([]File, error) {
	d.mu.Lock()
	var out []File
	for _, f := range d.files {
		if f.Owner == owner {
			out = append(out, f)
		}
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b File) int { return newestFirst(a.CreatedAt, b.CreatedAt, a.ID, b.ID) })
	return out, nil
}

// newestFirst orders by time, the newest first, then by id.
func newestFirst(a, b time.Time, aid, bid string) int {
	if c := b.Compare(a); c != 0 {
		return c
	}
	return strings.Compare(aid, bid)
}

func (d *Dir) DeleteFile(ctx context.Context, owner, id string) error {
	if _, err := d.File(ctx, owner, id); err != nil {
		return err
	}
	d.mu.Lock()
	delete(d.files, id)
	d.mu.Unlock()
	return os.RemoveAll(filepath.Join(d.dir, "files", id))
}

func (d *Dir) SaveContainer(_ context.Context, c Container) error {
	if !validID().MatchString(c.ID) {
		return fmt.Errorf("container id %q is not an id", c.ID)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	// The lock orders the writes of one container as the map sees them.
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := writeAtomic(filepath.Join(d.dir, "containers", c.ID+".json"), b); err != nil {
		return fmt.Errorf("save container %s: %w", c.ID, err)
	}
	d.containers[c.ID] = c
	return nil
}

func (d *Dir) Container(_ context.Context, owner, id string) (Container, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.containers[id]
	if !ok || c.Owner != owner {
		return Container{}, ErrNotFound
	}
	return c, nil
}

func (d *Dir) Containers(_ context.Context, owner string) ([]Container, error) {
	d.mu.Lock()
	var out []Container
	for _, c := range d.containers {
		if owner == "" || c.Owner == owner {
			out = append(out, c)
		}
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b Container) int { return newestFirst(a.CreatedAt, b.CreatedAt, a.ID, b.ID) })
	return out, nil
}

func (d *Dir) DeleteContainer(_ context.Context, owner, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.containers[id]
	if !ok || c.Owner != owner {
		return ErrNotFound
	}
	if err := os.Remove(filepath.Join(d.dir, "containers", id+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	delete(d.containers, id)
	return nil
}

// responses is the directory of owner's responses.
func (d *Dir) responses(owner string) string {
	return filepath.Join(d.dir, "responses", hex.EncodeToString([]byte(owner)))
}

func (d *Dir) SaveResponse(_ context.Context, r Response, keep int) error {
	if !validID().MatchString(r.ID) {
		return fmt.Errorf("response id %q is not an id", r.ID)
	}
	dir := d.responses(r.Owner)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	// Names sort by creation, so the oldest are the first listed.
	name := fmt.Sprintf("%020d-%s.json", r.CreatedAt.UnixNano(), r.ID)
	if err := writeAtomic(filepath.Join(dir, name), b); err != nil {
		return fmt.Errorf("store response %s: %w", r.ID, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	for len(names) > keep {
		_ = os.Remove(filepath.Join(dir, names[0]))
		names = names[1:]
	}
	return nil
}

// responseFile is the file of owner's response id.
func (d *Dir) responseFile(owner, id string) (string, error) {
	if !validID().MatchString(id) {
		return "", ErrNotFound
	}
	m, err := filepath.Glob(filepath.Join(d.responses(owner), "*-"+id+".json"))
	if err != nil || len(m) == 0 {
		return "", ErrNotFound
	}
	return m[0], nil
}

func (d *Dir) Response(_ context.Context, owner, id string) (Response, error) {
	p, err := d.responseFile(owner, id)
	if err != nil {
		return Response{}, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return Response{}, ErrNotFound
	}
	if err != nil {
		return Response{}, err
	}
	var r Response
	if err := json.Unmarshal(b, &r); err != nil {
		return Response{}, fmt.Errorf("response %s is damaged: %w", id, err)
	}
	return r, nil
}

func (d *Dir) DeleteResponse(_ context.Context, owner, id string) error {
	p, err := d.responseFile(owner, id)
	if err != nil {
		return err
	}
	err = os.Remove(p)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNotFound
	}
	return err
}

func (d *Dir) AddUsage(_ context.Context, owner, day string, tokens int64) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	days := d.usage[owner]
	if days == nil {
		days = map[string]int64{}
		d.usage[owner] = days
	}
	days[day] += tokens
	// Only today and yesterday matter; older days are forgotten.
	for k := range days {
		if k < dayBefore(day) {
			delete(days, k)
		}
	}
	b, err := json.Marshal(d.usage)
	if err == nil {
		err = writeAtomic(filepath.Join(d.dir, "usage.json"), b)
	}
	return days[day], err
}

// dayBefore is the day before day (2006-01-02), or day if it is not one.
func dayBefore(day string) string {
	t, err := time.Parse(time.DateOnly, day)
	if err != nil {
		return day
	}
	return t.AddDate(0, 0, -1).Format(time.DateOnly)
}

func (d *Dir) Usage(_ context.Context, owner, day string) (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.usage[owner][day], nil
}

func (d *Dir) AddGone(_ context.Context, owner string, digests []string, at, forget time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	answers := d.gone[owner]
	if answers == nil {
		answers = map[string]time.Time{}
		d.gone[owner] = answers
	}
	for k, t := range answers {
		if t.Before(forget) {
			delete(answers, k)
		}
	}
	for _, k := range digests {
		answers[k] = at
	}
	b, err := json.Marshal(d.gone)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(d.dir, "gone.json"), b)
}

func (d *Dir) Gone(_ context.Context, owner, digest string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.gone[owner][digest]
	return ok, nil
}

// writeAtomic writes b to path through a synced temporary file renamed
// over it.
func writeAtomic(path string, b []byte) error {
	return fsext.WriteFile(path, 0o600, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
