package serve

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// newID is an unguessable id with OpenAI's prefix for its kind: 128 random
// bits, so that knowing one id tells nothing of another.
func newID(prefix string) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return prefix + hex.EncodeToString(b)
}

// maxUpload bounds one uploaded file.
const maxUpload = 512 << 20

// fileObject is OpenAI's file object.
type fileObject struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`
	// Owner is the key's name; never sent.
	Owner string `json:"owner,omitempty"`
}

// fileStore keeps uploaded files on disk, one directory per file holding
// its record and its content, so they outlive the server.
type fileStore struct {
	dir string

	mu    sync.Mutex
	files map[string]fileObject
}

func openFileStore(dataDir string) (*fileStore, error) {
	dir := filepath.Join(dataDir, "files")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open the file store: %w", err)
	}
	fs := &fileStore{dir: dir, files: map[string]fileObject{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open the file store: %w", err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "file.json"))
		if err != nil {
			continue // an upload that never finished
		}
		var f fileObject
		if json.Unmarshal(b, &f) == nil && f.ID == e.Name() {
			fs.files[f.ID] = f
		}
	}
	return fs, nil
}

// add stores r as a new file of owner's.
func (fs *fileStore) add(owner, filename, purpose string, r io.Reader) (fileObject, error) {
	f := fileObject{ID: newID("file-"), Object: "file", CreatedAt: time.Now().Unix(), Filename: filename,
		Purpose: purpose, Status: "processed", Owner: owner}
	dir := filepath.Join(fs.dir, f.ID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return f, err
	}
	out, err := os.Create(filepath.Join(dir, "content"))
	if err != nil {
		return f, err
	}
	n, err := io.Copy(out, io.LimitReader(r, maxUpload+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > maxUpload {
		err = fmt.Errorf("the file is over %d MiB", maxUpload>>20)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return f, err
	}
	f.Bytes = n
	b, _ := json.Marshal(f)
	if err := os.WriteFile(filepath.Join(dir, "file.json"), b, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return f, err
	}
	fs.mu.Lock()
	fs.files[f.ID] = f
	fs.mu.Unlock()
	return f, nil
}

// get is owner's file id.
func (fs *fileStore) get(owner, id string) (fileObject, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f, ok := fs.files[id]
	return f, ok && f.Owner == owner
}

func (fs *fileStore) open(f fileObject) (*os.File, error) {
	return os.Open(filepath.Join(fs.dir, f.ID, "content"))
}

func (fs *fileStore) list(owner string) []fileObject {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []fileObject
	for _, f := range fs.files {
		if f.Owner == owner {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b fileObject) int {
		if a.CreatedAt != b.CreatedAt {
			return int(b.CreatedAt - a.CreatedAt)
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

func (fs *fileStore) remove(f fileObject) error {
	fs.mu.Lock()
	delete(fs.files, f.ID)
	fs.mu.Unlock()
	return os.RemoveAll(filepath.Join(fs.dir, f.ID))
}

// public is f as a client sees it.
func (f fileObject) public() fileObject { f.Owner = ""; return f }

// readUpload takes the file of a multipart upload (field "file"), with its
// name; it answers the client itself when there is none.
func readUpload(w http.ResponseWriter, r *http.Request) (name string, body io.ReadCloser, fields map[string]string, ok bool) {
	r.Body = http.MaxBytesReader(w, r.Body, maxUpload+1<<20)
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
		if err != nil {
			badRequest(w, "file", "the upload is not readable multipart/form-data: %v", err)
			return "", nil, nil, false
		}
		if part.FormName() == "file" {
			name := filepath.Base(part.FileName())
			if name == "." || name == ".." || name == "/" || name == "" || strings.ContainsRune(name, 0) {
				name = "upload"
			}
			return name, part, fields, true
		}
		b, _ := io.ReadAll(io.LimitReader(part, 4096))
		fields[part.FormName()] = string(b)
	}
}

func (s *Server) createFile(w http.ResponseWriter, r *http.Request) {
	name, body, fields, ok := readUpload(w, r)
	if !ok {
		return
	}
	defer body.Close()
	purpose := fields["purpose"]
	if purpose == "" {
		purpose = "user_data"
	}
	f, err := s.files.add(ownerOf(r), name, purpose, body)
	if err != nil {
		badRequest(w, "file", "cannot store the file: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, f.public())
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	var out []fileObject
	for _, f := range s.files.list(ownerOf(r)) {
		out = append(out, f.public())
	}
	writeJSON(w, http.StatusOK, newList(out, func(f fileObject) string { return f.ID }))
}

func (s *Server) getFile(w http.ResponseWriter, r *http.Request) {
	f, ok := s.files.get(ownerOf(r), r.PathValue("id"))
	if !ok {
		notFound(w, "file", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, f.public())
}

func (s *Server) getFileContent(w http.ResponseWriter, r *http.Request) {
	f, ok := s.files.get(ownerOf(r), r.PathValue("id"))
	if !ok {
		notFound(w, "file", r.PathValue("id"))
		return
	}
	fh, err := s.files.open(f)
	if err != nil {
		serverError(w, err)
		return
	}
	defer fh.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", f.Filename))
	http.ServeContent(w, r, "", time.Unix(f.CreatedAt, 0), fh)
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	f, ok := s.files.get(ownerOf(r), r.PathValue("id"))
	if !ok {
		notFound(w, "file", r.PathValue("id"))
		return
	}
	if err := s.files.remove(f); err != nil {
		serverError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, deleted{ID: f.ID, Object: "file", Deleted: true})
}
