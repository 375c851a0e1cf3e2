package adversarial

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hostileNames are file names a client may send: each is after something
// a careless server does with a name (joins it to a directory, decodes it,
// writes it to a header or a terminal). Those with marker in them aim at
// places on the host the test can look in afterwards.
func hostileNames(marker string) []string {
	return []string{
		"../../etc/passwd",
		"/etc/passwd",
		"..",
		".",
		".hidden",
		"a/b.csv",
		"a\x00b.csv",
		"a\nb.csv",
		strings.Repeat("n", 296) + ".csv", // 300 bytes, over a file name's 255
		"report\u202etxt.exe",             // shows as reportexe.txt
		"%2e%2e%2f%2e%2e%2fetc%2fpasswd",
		`..\..\windows.csv`,
		"/",
		"//",
		"../../../../../../../../tmp/" + marker + ".csv",
		"/tmp/" + marker + ".csv",
		"../" + marker + ".csv",
	}
}

// percentEncoded is every byte of s as %XX, as RFC 2231's filename*
// carries a name: NULs and newlines then reach the server whole.
func percentEncoded(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// badName says what is wrong with name as the name of one file, or "".
func badName(name string) string {
	switch {
	case name == "":
		return "it is empty"
	case name == "." || name == "..":
		return "it is " + name
	case strings.Contains(name, "/"):
		return "it holds a /"
	case strings.Contains(name, "\x00"):
		return "it holds a NUL"
	}
	return ""
}

// badWorkPath says what is wrong with p as the path of an uploaded file in
// a container, which is /mnt/data (the container's /work, as OpenAI's
// containers name it) and one plain name, or "".
func badWorkPath(p string) string {
	name, ok := strings.CutPrefix(p, "/mnt/data/")
	switch {
	case !ok:
		return "it is not in /mnt/data"
	case len(name) > 255:
		return "its name is longer than a file name can be"
	}
	return badName(name)
}

// refusedClearly fails unless r is a 400 in OpenAI's shape whose message
// says nothing of where the server keeps its data.
func (g *gateway) refusedClearly(t *testing.T, what string, r reply) {
	t.Helper()
	e, ok := r.apiError()
	switch {
	case r.status != http.StatusBadRequest || !ok:
		t.Errorf("%s: %d %.300q; want a sanitized name or a 400 saying what is wrong", what, r.status, r.body)
	case strings.Contains(e.Message, g.home):
		t.Errorf("%s: the 400 tells the client where the server keeps its data: %.300q", what, e.Message)
	}
}

// landed checks the answer to an upload into a container: the file is in
// /work under a plain name and holds what was sent, or the upload was
// clearly refused.
func (g *gateway) landed(t *testing.T, what string, r reply, data string) {
	t.Helper()
	if r.status != http.StatusOK {
		g.refusedClearly(t, what, r)
		return
	}
	var f struct {
		ID, Path    string
		ContainerID string `json:"container_id"`
	}
	if err := json.Unmarshal([]byte(r.body), &f); err != nil {
		t.Fatalf("%s: %v: %s", what, err, r.body)
	}
	if why := badWorkPath(f.Path); why != "" {
		t.Errorf("%s: the file is at %s: %s", what, quoted(f.Path), why)
	}
	got := g.as(t, g.alice, call{method: "GET", path: "/v1/containers/" + f.ContainerID + "/files/" + f.ID + "/content"})
	if got.status != http.StatusOK || got.body != data {
		t.Errorf("%s: %s holds %d %.300q, want what was uploaded", what, quoted(f.Path), got.status, got.body)
	}
}

// serveFileNames uploads files under hostile names in every way the API
// takes a name (multipart, with filename and with RFC 2231's filename*,
// to /v1/files and into a container; a stored file added by id; an
// input_file of a response), and asks for container files by hostile
// paths. Every name must end up a plain name in /work or be refused with a
// 400, and nothing may land anywhere else on the host.
func serveFileNames(t *testing.T, g *gateway) {
	marker := "terpname" + randomHex()
	content := "uploaded " + randomHex()
	outside := g.outsideData(t)
	passwd := sha256File(t, "/etc/passwd")
	cntr := newContainer(t, g, g.alice, "names")
	files := "/v1/containers/" + cntr + "/files"
	n := 0
	next := func() string { n++; return fmt.Sprintf("%s %d", content, n) }

	for _, name := range hostileNames(marker) {
		t.Run(quoted(name), func(t *testing.T) {
			for _, form := range []struct{ how, disposition string }{
				{"filename", `form-data; name="file"; filename="` + name + `"`},
				{"filename*", `form-data; name="file"; filename*=UTF-8''` + percentEncoded(name)},
			} {
				data := next()
				body, ct := multipartFile(form.disposition, data)
				r := g.as(t, g.alice, call{method: "POST", path: "/v1/files", body: body, contentType: ct})
				what := fmt.Sprintf("POST /v1/files with %s %s", form.how, quoted(name))
				if r.status == http.StatusOK {
					var f struct{ ID, Filename string }
					if err := json.Unmarshal([]byte(r.body), &f); err != nil {
						t.Fatalf("%s: %v: %s", what, err, r.body)
					}
					if why := badName(f.Filename); why != "" {
						t.Errorf("%s keeps the name %s: %s", what, quoted(f.Filename), why)
					}
					got := g.as(t, g.alice, call{method: "GET", path: "/v1/files/" + f.ID + "/content"})
					if got.status != http.StatusOK || got.body != data || strings.ContainsAny(got.header.Get("Content-Disposition"), "\r\n\x00") {
						t.Errorf("%s, downloaded: %d %.300q, Content-Disposition %.300q; want what was uploaded, its name quoted",
							what, got.status, got.body, got.header.Get("Content-Disposition"))
					}
					g.landed(t, what+", then added to a container by id",
						g.as(t, g.alice, call{method: "POST", path: files, body: jsonBody(map[string]string{"file_id": f.ID})}), data)
				} else {
					g.refusedClearly(t, what, r)
				}
				data = next()
				body, ct = multipartFile(form.disposition, data)
				g.landed(t, fmt.Sprintf("POST %s with %s %s", files, form.how, quoted(name)),
					g.as(t, g.alice, call{method: "POST", path: files, body: body, contentType: ct}), data)
			}
			r := g.as(t, g.alice, inputFile(cntr, name, next()))
			if r.status != http.StatusOK {
				g.refusedClearly(t, "an input_file named "+quoted(name), r)
			}
		})
	}
	t.Run("a container's first upload named /", func(t *testing.T) {
		// The name of a container's first upload decides where the
		// conversation keeps its uploads; whatever it is, the next
		// upload must still work.
		fresh := newContainer(t, g, g.alice, "first upload")
		if r := g.as(t, g.alice, inputFile(fresh, "/", next())); r.status != http.StatusOK {
			g.refusedClearly(t, `an input_file named "/"`, r)
		}
		data := next()
		g.landed(t, "the next upload", g.as(t, g.alice, upload("/v1/containers/"+fresh+"/files", "next.csv", data)), data)
	})
	t.Run("paths in URLs", func(t *testing.T) { servePathsInURLs(t, g, cntr) })

	list := g.as(t, g.alice, call{method: "GET", path: files})
	var listed struct{ Data []struct{ Path string } }
	if err := json.Unmarshal([]byte(list.body), &listed); err != nil || list.status != http.StatusOK {
		t.Fatalf("listing the container: %d %s", list.status, list.body)
	}
	for _, f := range listed.Data {
		if why := badWorkPath(f.Path); why != "" {
			t.Errorf("the container lists %q: %s", f.Path, why)
		}
	}
	if got := sha256File(t, "/etc/passwd"); got != passwd {
		t.Error("the host's /etc/passwd changed")
	}
	for p := range g.outsideData(t) {
		if !outside[p] {
			t.Errorf("%s appeared in the server's home, outside its data directory", p)
		}
	}
	for _, dir := range append([]string{"/", "/etc", "/tmp", os.TempDir(), filepath.Dir(g.home)}, ancestors(g.data)...) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.Contains(e.Name(), marker) {
				t.Errorf("an upload landed on the host at %s", filepath.Join(dir, e.Name()))
			}
		}
	}
	g.uploadsInPlace(t, content)
}

// inputFile is a response in container cntr whose input carries a file
// inline, under name.
func inputFile(cntr, name, data string) call {
	return call{method: "POST", path: "/v1/responses", body: jsonBody(map[string]any{"model": "test-model",
		"tools": []any{map[string]any{"type": "code_interpreter", "container": cntr}},
		"input": []any{map[string]any{"role": "user", "content": []any{
			map[string]string{"type": "input_text", "text": "look at it"},
			map[string]string{"type": "input_file", "filename": name, "file_data": base64.StdEncoding.EncodeToString([]byte(data))}}}}})}
}

// servePathsInURLs asks for container files and files by paths instead of
// ids, encoded every way: none may answer with a file, and none may
// delete one.
func servePathsInURLs(t *testing.T, g *gateway, cntr string) {
	files := "/v1/containers/" + cntr + "/files/"
	for _, c := range []call{
		{method: "GET", path: files + "..%2f..%2fetc%2fpasswd/content"},
		{method: "GET", path: files + "..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd"},
		{method: "GET", path: files + "%2e%2e%2f%2e%2e%2fetc%2fpasswd/content"},
		{method: "GET", path: files + "%252e%252e%252fetc%252fpasswd/content"},
		{method: "GET", path: files + "%2fetc%2fpasswd/content"},
		{method: "GET", path: files + "%2Fwork%2Fpasswd/content"},
		{method: "GET", path: files + "passwd/content"},
		{method: "GET", path: files + "passwd%00/content"},
		{method: "GET", path: files + "../../../../etc/passwd"},
		{method: "GET", path: files + "..;/..;/etc/passwd"},
		{method: "DELETE", path: files + "..%2f..%2fetc%2fpasswd"},
		{method: "DELETE", path: files + "%2Fwork%2Fpasswd"},
		{method: "DELETE", path: files + "passwd"},
		{method: "GET", path: "/v1/containers/..%2f..%2f..%2fetc/files"},
		{method: "GET", path: "/v1/containers/" + cntr + "%2f..%2f..%2f/files"},
		{method: "GET", path: "/v1/files/..%2f..%2fetc%2fpasswd/content"},
		{method: "GET", path: "/v1/files/..%2Ffiles/content"},
		{method: "GET", path: "/v1/files/%2e%2e/content"},
		// Links: signed copies; paths in any part reach nothing.
		{method: "GET", path: "/links/alice/..%2f..%2fetc%2fpasswd/9999999999/x/passwd"},
		{method: "GET", path: "/links/..%2f..%2f/file-0/9999999999/x/passwd"},
		{method: "GET", path: "/links/alice/%2fetc%2fpasswd/9999999999/x/passwd"},
		{method: "GET", path: "/links/alice/file-0/9999999999/x/..%2f..%2fetc%2fpasswd"},
		{method: "GET", path: "/links/alice/../../etc/passwd"},
	} {
		r := g.as(t, g.alice, c)
		if r.status >= 300 && r.status < 400 {
			// Where a redirect points is for the client to follow.
			loc := r.header.Get("Location")
			if !strings.HasPrefix(loc, "/") {
				t.Errorf("%s %s redirects off the server, to %q", c.method, c.path, loc)
				continue
			}
			r = g.as(t, g.alice, call{method: c.method, path: loc})
		}
		if r.status == http.StatusOK || strings.Contains(r.body, "root:x:0:0") {
			t.Errorf("%s %s answers %d %.300q; want a file by its id only", c.method, c.path, r.status, r.body)
		}
	}
	list := g.as(t, g.alice, call{method: "GET", path: "/v1/containers/" + cntr + "/files"})
	if !strings.Contains(list.body, `"/mnt/data/passwd"`) {
		t.Errorf("/work/passwd, uploaded as ../../etc/passwd, is gone after the deletes by path: %s", list.body)
	}
}

// newContainer makes a container as key and returns its id.
func newContainer(t *testing.T, g *gateway, key, name string) string {
	t.Helper()
	r := g.as(t, key, call{method: "POST", path: "/v1/containers", body: jsonBody(map[string]string{"name": name})})
	var c struct{ ID string }
	if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &c) != nil {
		t.Fatalf("make a container: %d %s", r.status, r.body)
	}
	return c.ID
}

// outsideData is every path in g's home that is not in its data
// directory.
func (g *gateway) outsideData(t *testing.T) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	_ = filepath.WalkDir(g.home, func(p string, d fs.DirEntry, err error) error {
		if p == g.data {
			return filepath.SkipDir
		}
		seen[p] = true
		return nil
	})
	return seen
}

// uploadsInPlace walks the data directory for the files holding content
// (what the uploads held) and fails for any that sits where no upload
// belongs: in a sandbox, only its work directory holds uploads, in a
// conversation only its inputs directory, and neither has subdirectories
// for them. The server's own store (the rest) may keep them as it likes.
func (g *gateway) uploadsInPlace(t *testing.T, content string) {
	t.Helper()
	found := holding(g.data, content)
	if len(found) == 0 {
		t.Errorf("found no upload in %s: the test looks in the wrong place", g.data)
	}
	for _, p := range found {
		rel, _ := filepath.Rel(g.data, p)
		parts := strings.Split(rel, string(filepath.Separator))
		switch {
		case len(parts) == 1:
			t.Errorf("an upload landed in the data directory itself: %s", p)
		case parts[0] == "sandboxes" && (len(parts) != 4 || parts[2] != "work"):
			t.Errorf("an upload landed in a sandbox outside its work directory: %s", rel)
		case parts[0] == "conversations" && (len(parts) != 4 || parts[2] != "inputs"):
			t.Errorf("an upload landed in a conversation outside its inputs: %s", rel)
		}
	}
}

// quoted is name as Go quotes it, cut short, for a subtest's name.
func quoted(name string) string {
	q := fmt.Sprintf("%q", name)
	if len(q) > 40 {
		q = q[:37] + "..."
	}
	return q
}

// ancestors are dir's parents up to /.
func ancestors(dir string) []string {
	var out []string
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == filepath.Dir(d) {
			return out
		}
	}
}

func sha256File(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
