package librechat

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
)

// languages are the values of lang terp runs: Python, and bash through
// Python's subprocess when the sandbox has it (the local sandbox binds the
// host's /usr, which does on Debian).
var languages = []string{"py", "bash"}

// execRequest is what POST /exec may say. Other fields (user_id, entity_id,
// and whatever the client's own parameters add, a key among them) are
// read and not used.
type execRequest struct {
	Lang      string    `json:"lang"`
	Code      string    `json:"code"`
	Args      argList   `json:"args"`
	Files     []fileRef `json:"files"`
	SessionID string    `json:"session_id"`
}

// fileRef is a file of an earlier run or upload that the client sends
// back, in either generation's words: {id, name, session_id} (the older
// @librechat/agents), or {id, resource_id, name, storage_session_id, kind}
// (the newer).
type fileRef struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	SessionID        string `json:"session_id"`
	StorageSessionID string `json:"storage_session_id"`
}

// session is the session a reference names.
func (f fileRef) session() string {
	if f.StorageSessionID != "" {
		return f.StorageSessionID
	}
	return f.SessionID
}

// argList is args, which clients send as a list of strings, or one string.
type argList []string

func (l *argList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = strings.Fields(one)
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("args is a list of strings")
	}
	*l = many
	return nil
}

// execReply is what LibreChat reads of a run, whether the code failed or
// not: HTTP 200, its output, and the files it wrote.
type execReply struct {
	SessionID string    `json:"session_id"`
	Stdout    string    `json:"stdout"`
	Stderr    string    `json:"stderr"`
	Files     []fileOut `json:"files"`
}

// fileOut is a file the run wrote: name is its path in /mnt/data, which
// LibreChat shows as an image when its extension is one.
type fileOut struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	StorageSessionID string `json:"storage_session_id"`
}

func (a *api) exec(w http.ResponseWriter, r *http.Request) {
	ctx, owner := r.Context(), serve.Owner(r)
	var req execRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		if refusal := serve.AsRefusal(err); refusal != nil {
			refuse(w, refusal)
			return
		}
		refuse(w, badRequestf("the request body is not the JSON /exec takes ({\"lang\": \"py\", \"code\": \"...\"}): %v", err))
		return
	}
	if !slices.Contains(languages, req.Lang) {
		refuse(w, badRequestf("terp runs lang %s, not %q: other languages are not in its sandboxes", strings.Join(languages, " and "), req.Lang))
		return
	}
	st, err := a.storedFiles(ctx, owner)
	if err != nil {
		refuse(w, err)
		return
	}
	session, note := a.pickSession(ctx, owner, req, st)
	unlock, err := a.lock(ctx, session)
	if err != nil {
		return // the client went away
	}
	defer unlock()
	l, made, err := a.lease(ctx, owner, session)
	if err != nil {
		// A forward to a replica that is gone runs the request here again,
		// which takes the session's lock again: let it go first.
		unlock()
	}
	switch {
	case a.host.Forwarded(w, r, err):
		return
	case err != nil:
		refuse(w, err)
		return
	}
	defer l.Release(context.WithoutCancel(ctx))
	notes, err := a.placeFiles(ctx, l, req.Files, st, made)
	if err != nil {
		refuse(w, err)
		return
	}
	notes = append([]string{note}, notes...)
	res, err := a.host.Exec(ctx, l, program(req), nil)
	if err != nil {
		refuse(w, err)
		return
	}
	reply := execReply{SessionID: session, Stdout: res.Stdout, Stderr: res.Stderr, Files: []fileOut{}}
	conv := l.Container().Conversation()
	// Of very many files (more than a model's step would list), those
	// the listing names are kept and reported; FilesNote says so.
	for _, f := range res.Files {
		if !slices.Contains(res.Shown, f.Path) {
			continue
		}
		rc, err := conv.ReadFile(ctx, f.Path)
		if err != nil {
			notes = append(notes, fmt.Sprintf("terp: /mnt/data/%s was written but cannot be read: %v", f.Path, err))
			continue
		}
		kept, err := a.keep(ctx, owner, session, f.Path, rc)
		_ = rc.Close()
		if err != nil {
			notes = append(notes, fmt.Sprintf("terp: /mnt/data/%s is not kept: %v", f.Path, err))
			continue
		}
		reply.Files = append(reply.Files, fileOut{ID: kept.ID, Name: kept.Filename, StorageSessionID: session})
	}
	notes = append(notes, res.FilesNote, res.Notice)
	reply.Stderr = withNotes(reply.Stderr, notes)
	serve.WriteJSON(w, http.StatusOK, reply)
}

// withNotes is stderr with terp's notes after it, one a line.
func withNotes(stderr string, notes []string) string {
	for _, n := range notes {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if stderr != "" && !strings.HasSuffix(stderr, "\n") {
			stderr += "\n"
		}
		stderr += n + "\n"
	}
	return stderr
}

// pickSession is the session a run goes to: the one the request names,
// else the first of the key's that a file reference names, else a new
// one. A session the request names that the key has neither files nor a
// container in (it expired with its files, or is another key's: the two
// are told alike) gets a new one, and a note says so: no key reaches
// another's, and a client that kept an old session's id still runs code.
func (a *api) pickSession(ctx context.Context, owner string, req execRequest, st stored) (session, note string) {
	if req.SessionID != "" {
		if a.known(ctx, owner, req.SessionID, st) {
			return req.SessionID, ""
		}
		note = fmt.Sprintf("terp: session %s is not kept any more, or never was: this run is in a new session", req.SessionID)
	}
	for _, f := range req.Files {
		if s := f.session(); a.known(ctx, owner, s, st) {
			return s, note
		}
	}
	return newID(), note
}

// known reports whether owner has files or a container in session.
func (a *api) known(ctx context.Context, owner, session string, st stored) bool {
	if !validID().MatchString(session) {
		return false
	}
	if st.sessionHas(session) {
		return true
	}
	rec, err := a.host.ContainerRecord(ctx, owner, session)
	return err == nil && rec.Origin == origin
}

// lease leases owner's session's container, made now (made) when the
// session has none: a new session, one of uploads only, or one whose
// container expired. One open in another replica is an error the host
// forwards the request with.
func (a *api) lease(ctx context.Context, owner, session string) (l *serve.Lease, made bool, err error) {
	l, err = a.host.Acquire(ctx, owner, session)
	switch {
	case err != nil:
		return nil, false, err
	case l != nil && l.Container().Record().Origin != origin:
		l.Release(ctx)
		return nil, false, &serve.NotFoundError{Kind: "session", ID: session}
	case l != nil:
		return l, false, nil
	}
	// Sessions live as long as the host's containers left alone, and
	// get the network the server's settings give.
	l, err = a.host.CreateContainer(ctx, owner, serve.ContainerSpec{ID: session, Name: origin, Origin: origin, Fresh: true,
		Network: a.host.SettingsNetwork()})
	return l, true, err
}

// placeFiles puts the referenced files into the session's /mnt/data: all
// of them in a container made now; otherwise those that are not there as
// they were kept (from another session, an older version, or lost with a
// sandbox). A reference to a file the key does not have (another key's,
// removed after keepFiles) puts nothing, and is told in the notes.
func (a *api) placeFiles(ctx context.Context, l *serve.Lease, refs []fileRef, st stored, made bool) ([]string, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	c := l.Container()
	session, conv := c.ID, c.Conversation()
	there := map[string]int64{}
	if !made {
		files, err := conv.Files(ctx)
		if err != nil && len(files) == 0 {
			return nil, err
		}
		for _, f := range files {
			there[f.Path] = f.Size
		}
	}
	var notes []string
	for _, ref := range refs {
		// A reference that names no session is taken by its id alone:
		// the id is the key's own either way.
		f, ok := st.byID[ref.ID]
		if !ok || (ref.session() != "" && sessionOf(f.Purpose) != ref.session()) {
			notes = append(notes, fmt.Sprintf("terp: %s (file %s) is not kept any more, or never was: upload it again", cmp.Or(ref.Name, "a file"), ref.ID))
			continue
		}
		name := cmp.Or(strings.TrimPrefix(ref.Name, "/mnt/data/"), f.Filename)
		if size, ok := there[name]; ok && size == f.Bytes && name == f.Filename && st.newest[session][name].ID == f.ID {
			continue // this session's own, as it left it
		}
		if err := a.place(ctx, l, f, name); err != nil {
			return notes, err
		}
	}
	return notes, nil
}

// place writes the kept file f to /mnt/data/name in l's container.
func (a *api) place(ctx context.Context, l *serve.Lease, f state.File, name string) error {
	rc, err := a.host.State().OpenFile(ctx, f)
	if err != nil {
		return err
	}
	defer rc.Close()
	return l.Container().Conversation().WriteFile(ctx, name, io.Reader(rc))
}

// program is the Python a request runs: its code, with args as sys.argv
// (on a line of its own before it, which tracebacks count), or a bash
// script run through Python, as the sandbox's process is Python.
func program(req execRequest) string {
	args, _ := json.Marshal(append([]string{}, req.Args...))
	if req.Lang == "bash" {
		code, _ := json.Marshal(req.Code)
		return fmt.Sprintf(`import shutil, subprocess, sys
if shutil.which("bash") is None:
    sys.stderr.write("bash is not in this sandbox: run lang py\n")
    sys.exit(127)
sys.exit(subprocess.run(["bash", "-c", %s, "bash", *%s]).returncode)
`, code, args)
	}
	if len(req.Args) == 0 {
		return req.Code
	}
	return fmt.Sprintf("import sys; sys.argv[1:] = %s; del sys\n%s", args, req.Code)
}
