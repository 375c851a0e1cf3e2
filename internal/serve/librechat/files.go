package librechat

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
)

// stored are a key's files of this API, as they are kept now.
type stored struct {
	byID map[string]state.File
	// newest is the newest file of each name in each session: the one a
	// session's /mnt/data holds, unless its sandbox was lost.
	newest map[string]map[string]state.File
}

// sessionHas reports whether the key has files in session.
func (s stored) sessionHas(session string) bool { return len(s.newest[session]) > 0 }

// storedFiles are owner's files of this API, those past keepFiles left out
// (and removed, now and then).
func (a *api) storedFiles(ctx context.Context, owner string) (stored, error) {
	all, err := a.host.State().Files(ctx, owner)
	if err != nil {
		return stored{}, err
	}
	out := stored{byID: map[string]state.File{}, newest: map[string]map[string]state.File{}}
	var old []state.File
	now := time.Now()
	for _, f := range all {
		session := sessionOf(f.Purpose)
		switch {
		case session == "":
			continue
		case now.Sub(f.CreatedAt) > keepFiles:
			old = append(old, f)
			continue
		}
		out.byID[f.ID] = f
		names := out.newest[session]
		if names == nil {
			names = map[string]state.File{}
			out.newest[session] = names
		}
		if was, ok := names[f.Filename]; !ok || f.CreatedAt.After(was.CreatedAt) {
			names[f.Filename] = f
		}
	}
	a.prune(ctx, owner, old)
	return out, nil
}

// prune removes owner's files past keepFiles, at most once in ten minutes
// a key, after the request that found them.
func (a *api) prune(ctx context.Context, owner string, old []state.File) {
	if len(old) == 0 {
		return
	}
	a.mu.Lock()
	due := time.Since(a.pruned[owner]) > 10*time.Minute
	if due {
		a.pruned[owner] = time.Now()
	}
	a.mu.Unlock()
	if !due {
		return
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		for _, f := range old {
			if err := a.host.State().DeleteFile(ctx, owner, f.ID); err != nil && !errors.Is(err, state.ErrNotFound) {
				a.host.Log().Warn("removing an old LibreChat file", "file", f.ID, "error", err)
			}
		}
	}()
}

// keep stores r as a file of session, named name (relative to /mnt/data).
func (a *api) keep(ctx context.Context, owner, session, name string, r io.Reader) (state.File, error) {
	f := state.File{ID: newID(), Owner: owner, Filename: name, Purpose: purpose(session), CreatedAt: time.Now()}
	f, err := a.host.State().PutFile(ctx, f, r, a.host.Caps().Upload)
	if errors.Is(err, state.ErrTooLarge) {
		return f, serve.TooLarge("the file "+name, a.host.Caps().Upload, "--max-upload")
	}
	return f, err
}

// uploadReply is what LibreChat reads of an upload: the message, the
// session, and each file's id as it names them.
type uploadReply struct {
	Message          string         `json:"message"`
	SessionID        string         `json:"session_id"`
	StorageSessionID string         `json:"storage_session_id"`
	Files            []uploadedFile `json:"files"`
}

type uploadedFile struct {
	FileID   string `json:"fileId"`
	Filename string `json:"filename"`
}

// upload keeps the files of a multipart upload (field "file", one or more)
// in a new session: no sandbox is made for it until an exec names them.
// entity_id (LibreChat's agent) is read and not used: a key's files are
// its own whatever agent uploaded them.
func (a *api) upload(w http.ResponseWriter, r *http.Request) {
	owner, session := serve.Owner(r), newID()
	mr, err := r.MultipartReader()
	if err != nil {
		refuse(w, badRequestf("upload the file as multipart/form-data with a field named file: %v", err))
		return
	}
	reply := uploadReply{Message: "success", SessionID: session, StorageSessionID: session, Files: []uploadedFile{}}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if refusal := serve.AsRefusal(err); refusal != nil {
				refuse(w, refusal)
				return
			}
			refuse(w, badRequestf("the upload is not readable multipart/form-data: %v", err))
			return
		}
		if part.FormName() != "file" {
			_, _ = io.Copy(io.Discard, io.LimitReader(part, 4096))
			continue
		}
		name := uploadName(part.FileName())
		body := &readError{r: a.host.UploadPart(part)}
		f, err := a.keep(r.Context(), owner, session, name, body)
		switch {
		case body.err != nil && serve.AsRefusal(body.err) != nil:
			refuse(w, body.err)
			return
		case body.err != nil:
			refuse(w, badRequestf("cannot read the upload of %s: %v", name, body.err))
			return
		case err != nil:
			a.host.Log().WarnContext(r.Context(), "storing a LibreChat upload", "error", err)
			refuse(w, err)
			return
		}
		reply.Files = append(reply.Files, uploadedFile{FileID: f.ID, Filename: f.Filename})
	}
	if len(reply.Files) == 0 {
		refuse(w, badRequestf("the upload has no field named file"))
		return
	}
	serve.WriteJSON(w, http.StatusOK, reply)
}

// uploadName is an uploaded file's name in /mnt/data: its base name, or
// "upload" for one that names no file.
func uploadName(name string) string {
	name = path.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "." || name == ".." || name == "/" || name == "" || strings.HasPrefix(name, ".") || strings.ContainsRune(name, 0) {
		return "upload"
	}
	return name
}

// readError remembers the error reading an upload ended with, which is the
// client's (cut short, too large, too slow); the state's failing to store
// what was read is terp's.
type readError struct {
	r   io.Reader
	err error
}

func (r *readError) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		r.err = err
	}
	return n, err
}

// file is owner's file id of session; another key's, another session's,
// or one past keepFiles is not found.
func (a *api) file(ctx context.Context, owner, session, id string) (state.File, error) {
	notFound := &serve.NotFoundError{Kind: "file", ID: session + "/" + id}
	if !validID().MatchString(session) || !validID().MatchString(id) {
		return state.File{}, notFound
	}
	f, err := a.host.State().File(ctx, owner, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return f, notFound
	case err != nil:
		return f, err
	case sessionOf(f.Purpose) != session || time.Since(f.CreatedAt) > keepFiles:
		return f, notFound
	}
	return f, nil
}

func (a *api) download(w http.ResponseWriter, r *http.Request) {
	f, err := a.file(r.Context(), serve.Owner(r), r.PathValue("session"), r.PathValue("file"))
	if err != nil {
		refuse(w, err)
		return
	}
	rc, err := a.host.State().OpenFile(r.Context(), f)
	if err != nil {
		refuse(w, err)
		return
	}
	defer rc.Close()
	kind := mime.TypeByExtension(path.Ext(f.Filename))
	if kind == "" {
		kind = "application/octet-stream"
	}
	w.Header().Set("Content-Type", kind)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(f.Filename)}))
	w.Header().Set("Content-Length", fmt.Sprint(f.Bytes))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
}

// fileEntry is a file as GET /files/{session} lists it: name is
// "SESSION/ID", which LibreChat matches against the identifier it keeps,
// and lastModified tells it whether to upload the file again.
type fileEntry struct {
	Name             string            `json:"name"`
	ID               string            `json:"id"`
	SessionID        string            `json:"session_id"`
	StorageSessionID string            `json:"storage_session_id"`
	Filename         string            `json:"filename"`
	Size             int64             `json:"size"`
	LastModified     string            `json:"lastModified"`
	ContentType      string            `json:"contentType,omitempty"`
	Metadata         map[string]string `json:"metadata"`
}

// files lists a session's files: with detail=full (@librechat/agents'
// fallback, which sends each back as a reference) only the newest of each
// name, else (detail=summary, LibreChat's check of an attachment's age)
// every one kept. A session the key has neither files nor a container in
// is not found.
func (a *api) files(w http.ResponseWriter, r *http.Request) {
	ctx, owner, session := r.Context(), serve.Owner(r), r.PathValue("session")
	notFound := &serve.NotFoundError{Kind: "session", ID: session}
	if !validID().MatchString(session) {
		refuse(w, notFound)
		return
	}
	st, err := a.storedFiles(ctx, owner)
	if err != nil {
		refuse(w, err)
		return
	}
	if !st.sessionHas(session) {
		rec, err := a.host.ContainerRecord(ctx, owner, session)
		if err != nil || rec.Origin != origin {
			refuse(w, notFound)
			return
		}
	}
	full := r.URL.Query().Get("detail") == "full"
	out := []fileEntry{}
	for _, f := range st.byID {
		if sessionOf(f.Purpose) != session || (full && st.newest[session][f.Filename].ID != f.ID) {
			continue
		}
		out = append(out, fileEntry{Name: session + "/" + f.ID, ID: f.ID, SessionID: session, StorageSessionID: session,
			Filename: f.Filename, Size: f.Bytes, LastModified: f.CreatedAt.UTC().Format(isoTime),
			ContentType: mime.TypeByExtension(path.Ext(f.Filename)), Metadata: map[string]string{"original-filename": f.Filename}})
	}
	sortEntries(out)
	serve.WriteJSON(w, http.StatusOK, out)
}

// sortEntries orders a listing by when each file was written, then by
// name, the same way every time.
func sortEntries(out []fileEntry) {
	slices.SortFunc(out, func(a, b fileEntry) int {
		return cmp.Or(cmp.Compare(a.LastModified, b.LastModified), cmp.Compare(a.Name, b.Name))
	})
}

// isoTime is how a listing writes times: as JavaScript's toISOString does,
// which LibreChat parses, and in an order that sorts as text.
const isoTime = "2006-01-02T15:04:05.000Z"
