// Package store keeps conversations on disk, so that a question can be
// followed up later, from another terp process, with the same history and
// the same /work files.
//
// Each conversation is a directory under $XDG_DATA_HOME/terp/conversations
// named by its id, holding conversation.json (the whole record), a lock file
// and inputs/ (copies of the files the user uploaded, so that they can be
// uploaded again when the sandbox is gone). Plain files were chosen over
// SQLite: a conversation is written whole after every step and read whole on
// resume, never queried across, so a database buys nothing; writing a
// temporary file, syncing it and renaming it over the old one makes every save
// atomic, so a terp killed mid-step leaves the previous step's record intact;
// one damaged file spoils one conversation, never the listing of the others;
// and users can read, back up or delete their conversations with ordinary
// tools. No cgo and no large dependency come with it.
package store

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/terpdev/terp/internal/fsext"
	"github.com/terpdev/terp/internal/llm"
)

// version is the record format; a record from a newer terp is refused
// rather than misread.
const version = 1

// Conversation is everything terp keeps of one conversation.
type Conversation struct {
	Version int       `json:"version"`
	ID      string    `json:"id"`
	Title   string    `json:"title"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Origin is the command that started it: ask, chat or batch.
	Origin   string   `json:"origin"`
	Settings Settings `json:"settings"`
	// Sandbox names the backend and the sandbox id that resumes it; the id
	// is empty while the sandbox runs, or once it is gone.
	Sandbox  SandboxRef    `json:"sandbox"`
	Messages []llm.Message `json:"messages"`
	// Values are the reprs of runs' last expressions (kernel mode), by
	// the tool call's id: what an export shows as a cell's value. The model
	// read each at the end of its run's stdout.
	Values    map[string]string `json:"values,omitempty"`
	Inputs    []File            `json:"inputs,omitempty"`
	Downloads []File            `json:"downloads,omitempty"`
	Usage     llm.Usage         `json:"usage"`
	Steps     int               `json:"steps"`
	Turns     int               `json:"turns"`
	// CodeRan is set, and saved, just before the conversation's code first
	// runs. A terp killed in that step saves no messages, yet the code may
	// have set variables a later kernel no longer has and left files in
	// /work: the follow-up must be told the first, and the conversation is
	// never discarded as empty because of the second.
	CodeRan bool `json:"code_ran,omitempty"`
}

// Settings are the settings a follow-up keeps unless told otherwise.
type Settings struct {
	Model    string `json:"model"`
	BaseURL  string `json:"base_url"`
	ExecMode string `json:"exec_mode"`
	MaxSteps int    `json:"max_steps"`
	// Network and NetworkAllow are the egress policy the conversation's
	// sandbox was made with; it is fixed for the conversation's life.
	Network      string   `json:"network,omitempty"`
	NetworkAllow []string `json:"network_allow,omitempty"`
	// ValueApart keeps a cell's trailing value out of its output, for a
	// front-end that shows it apart (see kernel.Options.ValueApart); fixed
	// for the conversation's life.
	ValueApart bool `json:"value_apart,omitempty"`
}

// SandboxRef says where the conversation's /work lives.
type SandboxRef struct {
	Backend   string `json:"backend"`
	SessionID string `json:"session_id,omitempty"`
}

// File is an uploaded or downloaded file.
type File struct {
	// Name is the path relative to /work.
	Name string `json:"name"`
	// Path is the file on the host: the user's original for an upload, the
	// downloaded copy for a download.
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// Store is where conversations are kept: a directory on this machine (Dir,
// the default), or a database that several terp serve replicas share.
// Every method is safe for concurrent use.
type Store interface {
	// Save writes the whole record, atomically: a crash leaves the old
	// record or the new one.
	Save(c *Conversation) error
	// Load reads the conversation with the exact id; ErrNotFound, or a
	// DamagedError for a record that cannot be read.
	Load(id string) (*Conversation, error)
	// Resolve turns an id or a unique prefix of one into the id.
	Resolve(prefix string) (string, error)
	// List returns every conversation, the most recently active first.
	List() ([]Entry, error)
	// Latest is the id of the most recently active readable conversation.
	Latest() (string, error)
	// Remove deletes a conversation's record and its kept uploads.
	Remove(id string) error
	// Lock takes the conversation for this process until Unlock, or
	// fails at once with an error wrapping ErrBusy. A process that dies
	// loses its locks.
	Lock(id string) (Lock, error)
	// PutInput keeps a copy of an upload, replacing one of the same name
	// whole or not at all; OpenInput reads it back for a new sandbox.
	PutInput(id, name string, r io.Reader) (int64, error)
	OpenInput(id, name string) (io.ReadCloser, error)
	RemoveInput(id, name string) error
	// HasInputs reports whether any upload is kept, even one the record
	// does not list yet.
	HasInputs(id string) (bool, error)
	// Where names the store in messages: what to free or fix when a save
	// fails.
	Where() string
}

// Lock is a conversation held by this process.
type Lock interface {
	Unlock() error
}

// Dir is the directory of conversations.
type Dir struct {
	dir string
}

var _ Store = (*Dir)(nil)

// Open returns the store under dataDir ($XDG_DATA_HOME/terp), creating it.
func Open(dataDir string) (*Dir, error) {
	dir := filepath.Join(dataDir, "conversations")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open the conversation store: %w", err)
	}
	return &Dir{dir: dir}, nil
}

// Where is the store's directory.
func (s *Dir) Where() string { return s.dir }

var idPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-f]{12}$`)
})

// ValidID reports whether id has the form of a conversation id (NewID):
// anything else, a path above all, names no conversation in any Store.
func ValidID(id string) bool { return idPattern().MatchString(id) }

// NewID returns a fresh conversation id: 12 hex digits, short enough to
// type, with a prefix usually unique after three or four.
func NewID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// New returns a new conversation record with id (see NewID); nothing is
// written until Save.
func New(id, origin, title string, settings Settings, backend string) *Conversation {
	now := time.Now().UTC()
	return &Conversation{
		Version: version, ID: id, Title: titleOf(title), Created: now, Updated: now,
		Origin: origin, Settings: settings, Sandbox: SandboxRef{Backend: backend},
	}
}

// titleOf is the first line of the first question, cut to fit a listing.
func titleOf(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		q = q[:i]
	}
	if r := []rune(q); len(r) > 60 {
		q = string(r[:59]) + "…"
	}
	return q
}

// SetTitle gives a conversation started without a question its title.
func (c *Conversation) SetTitle(q string) {
	if c.Title == "" {
		c.Title = titleOf(q)
	}
}

func (s *Dir) path(id string) string { return filepath.Join(s.dir, id) }

// InputsDir is where copies of a conversation's uploads are kept.
func (s *Dir) InputsDir(id string) string { return filepath.Join(s.path(id), "inputs") }

// PutInput copies r to the inputs directory, atomically, so a copy that
// fails (a full disk) leaves an earlier upload of the same name whole.
func (s *Dir) PutInput(id, name string, r io.Reader) (int64, error) {
	dir := s.InputsDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	var n int64
	err := fsext.WriteFile(filepath.Join(dir, name), 0o600, func(w io.Writer) (err error) {
		n, err = io.Copy(w, r)
		return err
	})
	return n, err
}

// OpenInput opens the kept copy of the upload name.
func (s *Dir) OpenInput(id, name string) (io.ReadCloser, error) {
	return os.Open(filepath.Join(s.InputsDir(id), name))
}

// RemoveInput forgets the kept copy of the upload name.
func (s *Dir) RemoveInput(id, name string) error {
	err := os.Remove(filepath.Join(s.InputsDir(id), name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// HasInputs reports whether the inputs directory holds any file.
func (s *Dir) HasInputs(id string) (bool, error) {
	kept, err := os.ReadDir(s.InputsDir(id))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return len(kept) > 0, err
}

// Save writes c atomically: a temporary file, synced, renamed over the old
// record, so that a crash at any moment leaves either the old record or the
// new one, never a mix.
func (s *Dir) Save(c *Conversation) error {
	c.Updated = time.Now().UTC()
	dir := s.path(c.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save conversation %s: %w", c.ID, err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("save conversation %s: %w", c.ID, err)
	}
	err = fsext.WriteFile(filepath.Join(dir, "conversation.json"), 0o600, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("save conversation %s: %w", c.ID, err)
	}
	return nil
}

// DamagedError is returned for a conversation whose record cannot be read.
type DamagedError struct {
	ID  string
	Err error
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("conversation %s is damaged (%v); remove it with: terp sessions rm %s", e.ID, e.Err, e.ID)
}

func (e *DamagedError) Unwrap() error { return e.Err }

// ErrNotFound is returned for an id or prefix that names no conversation.
var ErrNotFound = errors.New("no such conversation")

// Load reads the conversation with the exact id.
func (s *Dir) Load(id string) (*Conversation, error) {
	f, err := os.Open(filepath.Join(s.path(id), "conversation.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Decode(id, f)
}

// maxRecord bounds what Decode reads of one record.
const maxRecord = 512 << 20

// Decode reads the record of conversation id from r. Every Store reads its
// records through it, so a record that cannot be read is a DamagedError
// whichever store kept it: one that is not JSON, or is another
// conversation's, or comes from a newer terp.
func Decode(id string, r io.Reader) (*Conversation, error) {
	var c Conversation
	dec := json.NewDecoder(io.LimitReader(r, maxRecord))
	if err := dec.Decode(&c); err != nil {
		return nil, &DamagedError{ID: id, Err: err}
	}
	switch {
	case c.ID != id:
		return nil, &DamagedError{ID: id, Err: fmt.Errorf("the record is for conversation %q", c.ID)}
	case c.Version > version:
		return nil, &DamagedError{ID: id, Err: fmt.Errorf("written by a newer terp (format %d)", c.Version)}
	}
	return &c, nil
}

// Resolve turns an id or any unique prefix of one into the full id.
func (s *Dir) Resolve(prefix string) (string, error) {
	return ResolvePrefix(prefix, func(prefix string) ([]string, error) {
		ids, err := s.ids()
		if err != nil {
			return nil, err
		}
		var matches []string
		for _, id := range ids {
			if strings.HasPrefix(id, prefix) {
				matches = append(matches, id)
			}
		}
		return matches, nil
	})
}

// ResolvePrefix turns an id or a unique prefix of one into the full id,
// asking find for the ids that start with the prefix (lowercased and
// trimmed; six are enough), in order. Every Store resolves through it, so
// they all answer an empty, unknown or ambiguous prefix alike.
func ResolvePrefix(prefix string, find func(prefix string) ([]string, error)) (string, error) {
	prefix = strings.ToLower(strings.TrimSpace(prefix))
	if prefix == "" {
		return "", fmt.Errorf("%w: an empty id", ErrNotFound)
	}
	matches, err := find(prefix)
	if err != nil {
		return "", err
	}
	switch len(matches) {
	case 0:
		return "", fmt.Errorf("%w: %q (terp sessions ls lists them)", ErrNotFound, prefix)
	case 1:
		return matches[0], nil
	}
	if len(matches) > 5 {
		matches = append(matches[:5], "…")
	}
	return "", fmt.Errorf("%q is ambiguous: it starts %s; give more of the id", prefix, strings.Join(matches, ", "))
}

func (s *Dir) ids() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("read the conversation store: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && ValidID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Entry is one conversation in a listing: its record, or why it could not be
// read.
type Entry struct {
	ID           string
	Conversation *Conversation // nil when Err is set
	Err          error
}

// List returns every conversation, the most recently active first. A record
// that cannot be read is listed with its error, so one damaged conversation
// never hides the others.
func (s *Dir) List() ([]Entry, error) {
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(ids))
	for _, id := range ids {
		c, err := s.Load(id)
		out = append(out, Entry{ID: id, Conversation: c, Err: err})
	}
	sort.SliceStable(out, func(i, j int) bool { return updated(out[i]).After(updated(out[j])) })
	return out, nil
}

func updated(e Entry) time.Time {
	if e.Conversation == nil {
		return time.Time{}
	}
	return e.Conversation.Updated
}

// Latest returns the id of the most recently active readable conversation.
func (s *Dir) Latest() (string, error) {
	entries, err := s.List()
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Err == nil {
			return e.ID, nil
		}
	}
	return "", fmt.Errorf("%w yet: ask a question first", ErrNotFound)
}

// Remove deletes a conversation's record and inputs. The caller removes its
// sandbox first, while the record still says where it is.
func (s *Dir) Remove(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err := os.RemoveAll(s.path(id)); err != nil {
		return fmt.Errorf("remove conversation %s: %w", id, err)
	}
	return nil
}
