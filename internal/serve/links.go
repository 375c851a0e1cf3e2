package serve

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/serve/state"
)

// Links a browser can open: a chat UI shows a reply's chart as an <img>
// whose request carries no key, and a user scrolls back to it days later,
// long after its container expired. So a file the code saved is linked as
// a copy of it as it was when the reply was written (a stored file of
// purpose LinkPurpose, kept for the link's lifetime), at a URL that
// carries its own capability:
//
//	BASE/links/OWNER/FILE/EXPIRES/SIGNATURE/NAME
//
// SIGNATURE is an HMAC-SHA256 of OWNER, FILE and EXPIRES (Unix seconds)
// under a key derived from OWNER's API key: no state to share among
// replicas, and a key taken out of the keys file takes its links with it.
// NAME is only for people and the browser's "save as"; the stored file's
// own name is what the answer is served as. A server without keys
// (--no-auth, loopback only) signs with no secret: it already serves
// everything to anyone who can reach it.

// LinkPurpose is the purpose of the stored copies that links serve.
const LinkPurpose = "terp:link"

// OwnPurpose reports whether a stored file's purpose is one of terp's own
// protocols (a link's copy, a LibreChat session's file): such purposes
// hold a colon, which OpenAI's never do, and OpenAI's file listing leaves
// those files out.
func OwnPurpose(purpose string) bool { return strings.Contains(purpose, ":") }

// DefaultLinkLifetime is how long a link works unless Config.LinkLifetime
// says otherwise: long enough for a chat to be scrolled back to.
const DefaultLinkLifetime = 30 * 24 * time.Hour

// linkPattern is the links' route.
const linkPattern = "GET /links/{owner}/{id}/{expires}/{sig}/{name}"

// linkKey is the key owner's links are signed with, derived from the API
// key it holds.
func linkKey(apiKey string) []byte {
	sum := sha256.Sum256([]byte("terp link key\x00" + apiKey))
	return sum[:]
}

// linkSignature signs a link to owner's stored file id, good until expires.
func linkSignature(key []byte, owner, id string, expires int64) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s\x00%s\x00%d", owner, id, expires)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ErrLinkTooLarge is Link's error for a file over the upload bound, which
// is not copied: the reply names it without a link.
var ErrLinkTooLarge = errors.New("too large to link")

// Link copies the file at p (relative to /work) in c and returns a URL, on
// base (BaseURL), that serves the copy without a key until the link
// lifetime is over. A file over the upload bound (--max-upload) is
// ErrLinkTooLarge.
func (s *Server) Link(ctx context.Context, base string, c *Container, p string) (string, error) {
	key, ok := s.keys.linkKey(c.Owner)
	if !ok {
		return "", fmt.Errorf("no key of %q signs links", c.Owner)
	}
	rc, err := c.conv.ReadFile(ctx, p)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	now := time.Now()
	f, err := s.state.PutFile(ctx, state.File{ID: NewID("file-"), Owner: c.Owner, Filename: path.Base(p), Purpose: LinkPurpose, CreatedAt: now},
		rc, s.lim.caps.Upload)
	if errors.Is(err, state.ErrTooLarge) {
		return "", ErrLinkTooLarge
	}
	if err != nil {
		return "", fmt.Errorf("copy %s for its link: %w", p, err)
	}
	expires := now.Add(s.linkLifetime()).Unix()
	return fmt.Sprintf("%s/links/%s/%s/%d/%s/%s", base, url.PathEscape(c.Owner), f.ID, expires,
		linkSignature(key, c.Owner, f.ID, expires), url.PathEscape(f.Filename)), nil
}

func (s *Server) linkLifetime() time.Duration {
	if s.cfg.LinkLifetime > 0 {
		return s.cfg.LinkLifetime
	}
	return DefaultLinkLifetime
}

// BaseURL is the address the links in r's answer start with: --public-url
// when the server sits behind a proxy, else the server as r reached it.
func (s *Server) BaseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// inlineTypes are the types a link shows in the browser: images it
// decodes itself, which run nothing. Every other file is a download, so
// that no HTML or SVG a program wrote runs in the server's origin.
var inlineTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// links serves the links: the stored copy when the signature holds and the
// link has not expired. Its errors are plain text, for a person at a
// browser.
func (s *Server) links() Protocol {
	return Protocol{Name: "links", Routes: []Route{{Pattern: linkPattern, Public: true, Handler: s.serveLink}}}
}

func (s *Server) serveLink(w http.ResponseWriter, r *http.Request) {
	owner, id := r.PathValue("owner"), r.PathValue("id")
	expires, err := strconv.ParseInt(r.PathValue("expires"), 10, 64)
	key, ok := s.keys.linkKey(owner)
	if err != nil || !ok || !hmac.Equal([]byte(r.PathValue("sig")), []byte(linkSignature(key, owner, id, expires))) {
		linkError(w, http.StatusForbidden, "This link is not one terp serve made, or it was changed, or the key it was made for is gone. Ask again in the chat for a new one.")
		return
	}
	if at := time.Unix(expires, 0); time.Now().After(at) {
		linkError(w, http.StatusGone, fmt.Sprintf("This link expired on %s: links to the files terp saved work for %s (terp serve --link-lifetime). Ask again in the chat to make the file anew.",
			at.UTC().Format("2006-01-02 15:04 UTC"), lifetimeWords(s.linkLifetime())))
		return
	}
	f, err := s.state.File(r.Context(), owner, id)
	if err == nil && f.Purpose != LinkPurpose {
		err = state.ErrNotFound
	}
	var rc io.ReadCloser
	if err == nil {
		rc, err = s.state.OpenFile(r.Context(), f)
	}
	if errors.Is(err, state.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		linkError(w, http.StatusNotFound, "This file was deleted. Ask again in the chat to make it anew.")
		return
	}
	if err != nil {
		s.cfg.Log.Warn("serving a link", "file", id, "error", err)
		linkError(w, http.StatusInternalServerError, "terp serve could not read this file; try again.")
		return
	}
	defer rc.Close()
	h := w.Header()
	FileHeaders(h, f.Filename)
	// The copy never changes: a browser keeps it a day, or until the
	// link expires if that is sooner.
	h.Set("Cache-Control", fmt.Sprintf("private, max-age=%d, immutable", int(min(24*time.Hour, time.Until(time.Unix(expires, 0))).Seconds())))
	ServeContent(w, r, rc, f.Bytes)
}

// FileHeaders are the headers of a file a program wrote, served as
// name (ServeContent adds its length): its type by its extension; shown in the browser only if an image
// it decodes itself (inlineTypes), else a download; never sniffed nor
// run. Links and the key-holding routes that serve a container's files
// alike send them.
func FileHeaders(h http.Header, name string) {
	typ := mime.TypeByExtension(path.Ext(name))
	if typ == "" {
		typ = "application/octet-stream"
	}
	disposition := "attachment"
	if inlineTypes[typ] {
		disposition = "inline"
	}
	h.Set("Content-Type", typ)
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": name}))
	linkHeaders(h)
}

// linkHeaders are every link answer's: nothing sniffed, nothing run, no
// referrer sent on, and embeddable in a chat UI of another origin.
func linkHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "cross-origin")
}

func linkError(w http.ResponseWriter, status int, msg string) {
	linkHeaders(w.Header())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, msg)
}

// lifetimeWords says a lifetime in days, or hours when shorter.
func lifetimeWords(d time.Duration) string {
	if d >= 48*time.Hour {
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	}
	return d.Round(time.Minute).String()
}

// pruneLinks deletes the stored copies whose links have expired, every
// key's.
func (s *Server) pruneLinks(now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, owner := range s.keys.names() {
		files, err := s.state.Files(ctx, owner)
		if err != nil {
			s.cfg.Log.Warn("listing links to prune", "error", err)
			return
		}
		for _, f := range files {
			if f.Purpose == LinkPurpose && now.Sub(f.CreatedAt) > s.linkLifetime() {
				if err := s.state.DeleteFile(ctx, owner, f.ID); err != nil && !errors.Is(err, state.ErrNotFound) {
					s.cfg.Log.Warn("pruning a link", "file", f.ID, "error", err)
				}
			}
		}
	}
}

// ServeContent writes the body of a file of size bytes read from body, as
// FileHeaders described it: whole, or the one byte range a Range header
// asks for (206 with Content-Range), so that a download that broke off
// goes on where it stopped and a player seeks. Several ranges, or one it
// cannot serve, get the whole file, as RFC 9110 allows.
func ServeContent(w http.ResponseWriter, r *http.Request, body io.Reader, size int64) {
	w.Header().Set("Accept-Ranges", "bytes")
	start, end, ok := byteRange(r.Header.Get("Range"), size)
	if !ok {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = io.Copy(w, body)
		}
		return
	}
	if start >= size {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		w.Header().Del("Content-Length")
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		return
	}
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, size))
	w.Header().Set("Content-Length", strconv.FormatInt(end-start+1, 10))
	w.WriteHeader(http.StatusPartialContent)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.CopyN(io.Discard, body, start); err != nil {
		return
	}
	_, _ = io.CopyN(w, body, end-start+1)
}

// byteRange is the one range of a "bytes=" Range header, its end cut to
// the file's; ok is false for no header, several ranges, or one malformed.
// A start past the end is returned as it is, for a 416.
func byteRange(h string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	from, to, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false
	}
	var err error
	switch {
	case from == "": // the last N bytes
		n, err := strconv.ParseInt(to, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, size > 0
	case to == "":
		end = size - 1
		start, err = strconv.ParseInt(from, 10, 64)
	default:
		if start, err = strconv.ParseInt(from, 10, 64); err == nil {
			end, err = strconv.ParseInt(to, 10, 64)
		}
		end = min(end, size-1)
	}
	if err != nil || start < 0 || (to != "" && end < start && start < size) {
		return 0, 0, false
	}
	return start, end, true
}
