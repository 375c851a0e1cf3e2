package openaiapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/state"
)

// fileObject is OpenAI's file object.
type fileObject struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`
}

// fileObjectOf is the API's view of a stored file.
func fileObjectOf(f state.File) fileObject {
	return fileObject{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt.Unix(), Filename: f.Filename,
		Purpose: f.Purpose, Status: "processed"}
}

// readUpload takes the file of a multipart upload (field "file"), with its
// name, bounded by Caps.Upload; it answers the client itself when there is
// none.
func (s *api) readUpload(w http.ResponseWriter, r *http.Request) (name string, body io.Reader, fields map[string]string, ok bool) {
	mr, err := r.MultipartReader()
	if err != nil {
		badRequest(w, "file", "upload the file as multipart/form-data with a field named file: %v", err)
		return "", nil, nil, false
	}
	fields = map[string]string{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			badRequest(w, "file", "the upload has no field named file")
			return "", nil, nil, false
		}
		if refusal := serve.AsRefusal(err); refusal != nil {
			answerRefusal(w, refusal)
			return "", nil, nil, false
		}
		if err != nil {
			badRequest(w, "file", "the upload is not readable multipart/form-data: %v", err)
			return "", nil, nil, false
		}
		if part.FormName() == "file" {
			name := filepath.Base(part.FileName())
			if name == "." || name == ".." || name == "/" || name == "" || strings.ContainsRune(name, 0) {
				name = "upload"
			}
			return name, s.UploadPart(part), fields, true
		}
		b, _ := io.ReadAll(io.LimitReader(part, 4096))
		fields[part.FormName()] = string(b)
	}
}

func (s *api) createFile(w http.ResponseWriter, r *http.Request) {
	name, body, fields, ok := s.readUpload(w, r)
	if !ok {
		return
	}
	purpose := fields["purpose"]
	if purpose == "" {
		purpose = "user_data"
	}
	if serve.OwnPurpose(purpose) {
		badRequest(w, "purpose", "purpose %q is not one of OpenAI's (user_data, assistants, ...): a purpose with a colon is terp's own", purpose)
		return
	}
	f := state.File{ID: serve.NewID("file-"), Owner: serve.Owner(r), Filename: name, Purpose: purpose, CreatedAt: time.Now()}
	upload := &readError{r: body}
	f, err := s.State().PutFile(r.Context(), f, upload, s.Caps().Upload)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, fileObjectOf(f))
	case upload.err != nil && serve.AsRefusal(upload.err) != nil: // too large, or too slow
		answerRefusal(w, serve.AsRefusal(upload.err))
	case upload.err != nil:
		badRequest(w, "file", "cannot read the upload: %v", upload.err)
	case errors.Is(err, state.ErrTooLarge):
		answerRefusal(w, serve.TooLarge("the file", s.Caps().Upload, "--max-upload"))
	default:
		s.Log().WarnContext(r.Context(), "storing a file", "file", f.ID, "error", err)
		serverError(w, fmt.Errorf("cannot store file %s: %v", f.ID, err))
	}
}

// readError remembers the error reading an upload ended with, which is
// the client's (cut short, too large, too slow); the state's failing to
// store what was read is terp's.
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

// storedFile is owner's stored file id, which a request names as param.
// One that is not there (or is another key's) is the client's mistake,
// answered 400 with notThere; any other failure is terp's own, answered
// 500 with its cause (told, not classified again: %v), and logged.
func (s *api) storedFile(ctx context.Context, owner, id, param, notThere string) (state.File, *paramError) {
	f, err := s.State().File(ctx, owner, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return f, badParam(param, notThere)
	case err != nil:
		s.Log().WarnContext(ctx, "reading a stored file", "file", id, "error", err)
		return f, &paramError{err: fmt.Errorf("cannot read file %s: %v", id, err)}
	}
	return f, nil
}

func (s *api) listFiles(w http.ResponseWriter, r *http.Request) {
	files, err := s.State().Files(r.Context(), serve.Owner(r))
	if err != nil {
		serverError(w, err)
		return
	}
	out := make([]fileObject, 0, len(files))
	for _, f := range files {
		if !serve.OwnPurpose(f.Purpose) { // links' copies, LibreChat's files
			out = append(out, fileObjectOf(f))
		}
	}
	writeJSON(w, http.StatusOK, newList(out, func(f fileObject) string { return f.ID }))
}

func (s *api) getFile(w http.ResponseWriter, r *http.Request) {
	f, err := s.State().File(r.Context(), serve.Owner(r), r.PathValue("id"))
	if err != nil {
		stateError(w, err, "file", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, fileObjectOf(f))
}

func (s *api) getFileContent(w http.ResponseWriter, r *http.Request) {
	f, err := s.State().File(r.Context(), serve.Owner(r), r.PathValue("id"))
	if err != nil {
		stateError(w, err, "file", r.PathValue("id"))
		return
	}
	rc, err := s.State().OpenFile(r.Context(), f)
	if err != nil {
		serverError(w, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": f.Filename}))
	serve.ServeContent(w, r, rc, f.Bytes)
}

func (s *api) deleteFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.State().DeleteFile(r.Context(), serve.Owner(r), id); err != nil {
		stateError(w, err, "file", id)
		return
	}
	writeJSON(w, http.StatusOK, deleted{ID: id, Object: "file", Deleted: true})
}

// stateError answers for a lookup in the state that failed: 404 for an
// object that is not there (or is another key's), 500 otherwise.
func stateError(w http.ResponseWriter, err error, kind, id string) {
	if errors.Is(err, state.ErrNotFound) {
		notFound(w, kind, id)
		return
	}
	serverError(w, err)
}

// isImage says whether the file at p is shown as an image: in a chat
// completion's answer, and in a response's code_interpreter_call outputs.
// One list, so that both APIs show the same files.
func isImage(p string) bool {
	switch strings.ToLower(path.Ext(p)) {
	case ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp":
		return true
	}
	return false
}
