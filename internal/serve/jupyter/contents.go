package jupyter

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/serve"
)

// Contents: a Jupyter Server serves its own directory; terp has none of
// its own, only each kernel's /work. The root lists a directory per kernel
// of the key's, named by the kernel's id, and each holds that kernel's
// files: enough for the clients that list what a kernel saved, download it,
// or upload a file for it (bounded like the host's uploads).

// contentModel is a file or directory as the contents API shows it.
type contentModel struct {
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	Type         string  `json:"type"`
	Format       *string `json:"format"`
	Mimetype     *string `json:"mimetype"`
	Content      any     `json:"content"`
	Created      string  `json:"created"`
	LastModified string  `json:"last_modified"`
	Writable     bool    `json:"writable"`
	Size         *int64  `json:"size"`
}

func dirModel(p string, entries []contentModel) contentModel {
	format := "json"
	m := contentModel{Name: path.Base("/" + p), Path: p, Type: "directory", Format: &format, Created: now(), LastModified: now(), Writable: true}
	if p == "" {
		m.Name = ""
	}
	if entries != nil {
		m.Content = entries
	} else {
		m.Format = nil
	}
	return m
}

func fileModel(kernelID string, fi sandbox.FileInfo) contentModel {
	size := fi.Size
	t := fi.ModTime.UTC().Format(time.RFC3339)
	return contentModel{Name: path.Base(fi.Path), Path: kernelID + "/" + fi.Path, Type: "file", Created: t, LastModified: t, Writable: true, Size: &size}
}

// splitContentPath is a contents path's kernel and the path in its /work.
func splitContentPath(p string) (kernelID, rel string) {
	kernelID, rel, _ = strings.Cut(strings.Trim(p, "/"), "/")
	return kernelID, rel
}

func (a *api) getContents(w http.ResponseWriter, r *http.Request) {
	kid, rel := splitContentPath(r.PathValue("path"))
	if kid == "" {
		recs, err := a.kernelRecords(r.Context(), serve.Owner(r))
		if err != nil {
			refuse(w, err)
			return
		}
		entries := []contentModel{}
		for _, rec := range recs {
			entries = append(entries, dirModel(rec.ID, nil))
		}
		serve.WriteJSON(w, http.StatusOK, dirModel("", entries))
		return
	}
	r.SetPathValue("id", kid)
	a.withKernel(w, r, func(l *serve.Lease) {
		conv := l.Container().Conversation()
		infos, err := conv.Files(r.Context())
		if err != nil && len(infos) == 0 {
			refuse(w, err)
			return
		}
		if rel == "" {
			entries := []contentModel{}
			for _, fi := range infos {
				entries = append(entries, fileModel(kid, fi))
			}
			serve.WriteJSON(w, http.StatusOK, dirModel(kid, entries))
			return
		}
		for _, fi := range infos {
			if fi.Path == rel {
				m := fileModel(kid, fi)
				if r.URL.Query().Get("content") != "0" {
					if err := a.readContent(r, l, &m, fi); err != nil {
						refuse(w, err)
						return
					}
				}
				serve.WriteJSON(w, http.StatusOK, m)
				return
			}
		}
		refuse(w, &serve.NotFoundError{Kind: "file", ID: r.PathValue("path")})
	})
}

// readContent fills m's content: text when it is UTF-8 and base64 was not
// asked for, else base64; a file over the upload cap is refused.
func (a *api) readContent(r *http.Request, l *serve.Lease, m *contentModel, fi sandbox.FileInfo) error {
	limit := a.host.Caps().Upload
	if fi.Size > limit {
		return serve.TooLarge("the file", limit, "--max-upload")
	}
	rc, err := l.Container().Conversation().ReadFile(r.Context(), fi.Path)
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return err
	}
	format, mime := "base64", "application/octet-stream"
	if r.URL.Query().Get("format") != "base64" && utf8.Valid(b) {
		format, mime = "text", "text/plain"
		m.Content = string(b)
	} else {
		m.Content = base64.StdEncoding.EncodeToString(b)
	}
	m.Format, m.Mimetype = &format, &mime
	return nil
}

// putRequest is a file a client saves: text or base64.
type putRequest struct {
	Type    string `json:"type"`
	Format  string `json:"format"`
	Content string `json:"content"`
}

func (a *api) putContents(w http.ResponseWriter, r *http.Request) {
	kid, rel := splitContentPath(r.PathValue("path"))
	if kid == "" || rel == "" {
		refuse(w, &badRequest{"save a file as KERNEL_ID/NAME: each kernel of yours is a directory of the contents"})
		return
	}
	var req putRequest
	if err := decode(r, &req); err != nil {
		refuse(w, err)
		return
	}
	if req.Type != "" && req.Type != "file" {
		refuse(w, &badRequest{fmt.Sprintf("terp saves files, not a %s", req.Type)})
		return
	}
	data := []byte(req.Content)
	if req.Format == "base64" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(req.Content); err != nil {
			refuse(w, &badRequest{"the content is not base64: " + err.Error()})
			return
		}
	}
	if limit := a.host.Caps().Upload; int64(len(data)) > limit {
		refuse(w, serve.TooLarge("the file", limit, "--max-upload"))
		return
	}
	r.SetPathValue("id", kid)
	a.withKernel(w, r, func(l *serve.Lease) {
		if err := a.host.Put(r.Context(), l.Container(), rel, bytes.NewReader(data)); err != nil {
			refuse(w, err)
			return
		}
		size := int64(len(data))
		serve.WriteJSON(w, http.StatusCreated, fileModel(kid, sandbox.FileInfo{Path: rel, Size: size, ModTime: time.Now()}))
	})
}
