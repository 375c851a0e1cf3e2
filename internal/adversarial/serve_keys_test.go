package adversarial

import (
	"encoding/base64"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// probe is one request that names an object by id.
type probe struct {
	name string
	req  func(id string) call
}

// containerProbes are every request that names a container: read it,
// delete it, list, read, download and delete its file cfile, upload into
// it, add own (a file of the sender's) to it, run a response or a chat
// completion in it.
func containerProbes(cfile, own string) []probe {
	return []probe{
		{"get", func(id string) call { return call{method: "GET", path: "/v1/containers/" + id} }},
		{"delete", func(id string) call { return call{method: "DELETE", path: "/v1/containers/" + id} }},
		{"list its files", func(id string) call { return call{method: "GET", path: "/v1/containers/" + id + "/files"} }},
		{"upload into it", func(id string) call { return upload("/v1/containers/"+id+"/files", "intruder.txt", "intruder") }},
		{"add a file by id", func(id string) call {
			return call{method: "POST", path: "/v1/containers/" + id + "/files", body: jsonBody(map[string]string{"file_id": own})}
		}},
		{"get its file", func(id string) call { return call{method: "GET", path: "/v1/containers/" + id + "/files/" + cfile} }},
		{"download its file", func(id string) call {
			return call{method: "GET", path: "/v1/containers/" + id + "/files/" + cfile + "/content"}
		}},
		{"delete its file", func(id string) call {
			return call{method: "DELETE", path: "/v1/containers/" + id + "/files/" + cfile}
		}},
		{"run a response in it", func(id string) call {
			return call{method: "POST", path: "/v1/responses", body: jsonBody(map[string]any{"model": "test-model", "input": "hello",
				"tools": []any{map[string]any{"type": "code_interpreter", "container": id}}})}
		}},
		{"chat in it", func(id string) call {
			return call{method: "POST", path: "/v1/chat/completions", header: map[string]string{"X-Terp-Container": id},
				body: `{"model": "test-model", "tools": [{"type": "code_interpreter"}], "messages": [{"role": "user", "content": "hello"}]}`}
		}},
	}
}

// containerFileProbes name a container file of another's from the
// sender's own container.
func containerFileProbes(own string) []probe {
	base := "/v1/containers/" + own + "/files/"
	return []probe{
		{"get", func(id string) call { return call{method: "GET", path: base + id} }},
		{"download", func(id string) call { return call{method: "GET", path: base + id + "/content"} }},
		{"delete", func(id string) call { return call{method: "DELETE", path: base + id} }},
	}
}

// fileProbes are every request that names an uploaded file: read,
// download, delete it, and put it into a container in each way there is.
func fileProbes(ownContainer string) []probe {
	return []probe{
		{"get", func(id string) call { return call{method: "GET", path: "/v1/files/" + id} }},
		{"download", func(id string) call { return call{method: "GET", path: "/v1/files/" + id + "/content"} }},
		{"delete", func(id string) call { return call{method: "DELETE", path: "/v1/files/" + id} }},
		{"input_file of a response", func(id string) call {
			return call{method: "POST", path: "/v1/responses", body: jsonBody(map[string]any{"model": "test-model",
				"tools": []any{map[string]any{"type": "code_interpreter", "container": map[string]string{"type": "auto"}}},
				"input": []any{map[string]any{"role": "user", "content": []any{
					map[string]string{"type": "input_text", "text": "read it"},
					map[string]string{"type": "input_file", "file_id": id}}}}})}
		}},
		{"file_ids of a response's container", func(id string) call {
			return call{method: "POST", path: "/v1/responses", body: jsonBody(map[string]any{"model": "test-model", "input": "read it",
				"tools": []any{map[string]any{"type": "code_interpreter", "container": map[string]any{"type": "auto", "file_ids": []string{id}}}}})}
		}},
		{"file_ids of a new container", func(id string) call {
			return call{method: "POST", path: "/v1/containers", body: jsonBody(map[string]any{"name": "mine", "file_ids": []string{id}})}
		}},
		{"added to own container", func(id string) call {
			return call{method: "POST", path: "/v1/containers/" + ownContainer + "/files", body: jsonBody(map[string]string{"file_id": id})}
		}},
	}
}

// responseProbes are every request that names a response.
func responseProbes() []probe {
	return []probe{
		{"get", func(id string) call { return call{method: "GET", path: "/v1/responses/" + id} }},
		{"delete", func(id string) call { return call{method: "DELETE", path: "/v1/responses/" + id} }},
		{"continue it", func(id string) call {
			return call{method: "POST", path: "/v1/responses", body: jsonBody(map[string]any{"model": "test-model", "input": "go on",
				"previous_response_id": id, "tools": []any{map[string]string{"type": "code_interpreter"}}})}
		}},
	}
}

// bobsProbes are the probes of alice's objects that bob sends, by the
// kind of object and with alice's id of it.
func bobsProbes(fx *serveFixture) []struct {
	kind, id string
	probes   []probe
} {
	return []struct {
		kind, id string
		probes   []probe
	}{
		{"container", fx.container, containerProbes(fx.containerFile, fx.bobFile)},
		{"container file", fx.containerFile, containerFileProbes(fx.bobContainer)},
		{"container file the code made", fx.madeFile, containerFileProbes(fx.bobContainer)},
		{"file", fx.file, fileProbes(fx.bobContainer)},
		{"response", fx.response, responseProbes()},
	}
}

// refusedAlike sends p from key with the real id and with a made-up one of
// the same shape, and fails unless both are refused (404, or 400 for an id
// inside a body) with the same answer but for the id: what comes back must
// not tell that the real one exists.
func refusedAlike(t *testing.T, g *gateway, key, real string, p probe) reply {
	t.Helper()
	fake := like(real)
	got, missing := g.as(t, key, p.req(real)), g.as(t, key, p.req(fake))
	if got.status != http.StatusNotFound && got.status != http.StatusBadRequest {
		t.Errorf("%s: %d %s; want 404 or 400", p.name, got.status, got.body)
		return got
	}
	if _, ok := got.apiError(); !ok {
		t.Errorf("%s: %d %q is not OpenAI's error shape", p.name, got.status, got.body)
	}
	same := func(r reply, id string) string { return strings.ReplaceAll(r.body, id, "{id}") }
	if got.status != missing.status || same(got, real) != same(missing, fake) {
		t.Errorf("%s tells a real id from a made-up one:\nreal %d %s\nfake %d %s", p.name, got.status, got.body, missing.status, missing.body)
	}
	for _, h := range []string{"Content-Type", "Content-Length", "X-Terp-Container"} {
		if got.header.Get(h) != missing.header.Get(h) {
			t.Errorf("%s: the %s header tells a real id from a made-up one: %q, %q", p.name, h, got.header.Get(h), missing.header.Get(h))
		}
	}
	return got
}

// serveOtherKey has bob go after each of alice's objects in every way the
// API offers: every attempt must be refused as if the object did not
// exist, and give away nothing of hers.
func serveOtherKey(t *testing.T, fx *serveFixture) {
	g := fx.g
	for _, kind := range bobsProbes(fx) {
		for _, p := range kind.probes {
			t.Run(kind.kind+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				got := refusedAlike(t, g, g.bob, kind.id, p)
				for _, id := range fx.ids {
					if id.owner == "alice" && id.id != kind.id && strings.Contains(got.body, id.id) {
						t.Errorf("bob is told the id of alice's %s: %s", id.what, got.body)
					}
				}
				if strings.Contains(got.body, fx.secret) {
					t.Errorf("bob is given alice's data: %s", got.body)
				}
			})
		}
	}
}

// serveListsOwn has bob list containers, files and his own container's
// files: he sees what he made and nothing else, whatever cursor he gives.
func serveListsOwn(t *testing.T, fx *serveFixture) {
	g := fx.g
	ctx := sdkContext(t)
	bob := g.client(g.bob)
	cs, err := bob.Containers.List(ctx, openai.ContainerListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Data {
		if c.ID != fx.bobContainer {
			t.Errorf("bob lists the container %s (%q); want only his own", c.ID, c.Name)
		}
	}
	fs, err := bob.Files.List(ctx, openai.FileListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range fs.Data {
		ids = append(ids, f.ID)
	}
	if !slices.Equal(ids, []string{fx.bobFile}) {
		t.Errorf("bob lists the files %v; want only his own %s", ids, fx.bobFile)
	}
	if g.as(t, g.bob, call{method: "GET", path: "/v1/containers/" + fx.bobContainer}).status == http.StatusOK {
		cfs, err := bob.Containers.Files.List(ctx, fx.bobContainer, openai.ContainerFileListParams{})
		if err != nil || len(cfs.Data) != 0 {
			t.Errorf("bob's container, into which only alice's ids were sent, holds %+v (%v); want nothing", cfs, err)
		}
	}
	for _, path := range []string{
		"/v1/containers?limit=100&order=asc&after=" + fx.container,
		"/v1/files?limit=100&purpose=user_data&after=" + fx.file,
		"/v1/containers/" + fx.bobContainer + "/files?after=" + fx.containerFile,
	} {
		got := g.as(t, g.bob, call{method: "GET", path: path})
		for _, id := range fx.ids {
			if id.owner == "alice" && strings.Contains(got.body, id.id) {
				t.Errorf("GET %s shows bob alice's %s: %s", path, id.what, got.body)
			}
		}
	}
}

// serveBadKeys sends every request of bob's probes, aimed at alice's real
// objects, and a few more, with no key, a wrong one, or one that is
// almost alice's: each is refused with the same 401, which tells nothing
// of what the request named.
func serveBadKeys(t *testing.T, fx *serveFixture) {
	g := fx.g
	basic := base64.StdEncoding.EncodeToString([]byte("alice:" + g.alice))
	// Each way of sending no valid key: Authorization headers, other
	// headers, and the key in the query.
	type badKey struct {
		name   string
		auth   []string
		header map[string]string
		query  string
	}
	bad := []badKey{
		{name: "no key"},
		{name: "an empty Authorization", auth: []string{""}},
		{name: "a wrong key", auth: []string{"Bearer " + like(g.alice)}},
		{name: "a prefix of alice's", auth: []string{"Bearer " + g.alice[:len(g.alice)-1]}},
		{name: "a short prefix of alice's", auth: []string{"Bearer " + g.alice[:9]}},
		{name: "alice's and more", auth: []string{"Bearer " + g.alice + "0"}},
		{name: "alice's in upper case", auth: []string{"Bearer " + strings.ToUpper(g.alice)}},
		{name: "Bearer and spaces", auth: []string{"Bearer     "}},
		{name: "Bearer alone", auth: []string{"Bearer"}},
		{name: "alice's without Bearer", auth: []string{g.alice}},
		{name: "alice's as Basic", auth: []string{"Basic " + basic}},
		{name: "alice's in Azure's and other headers", header: map[string]string{"api-key": g.alice, "X-Api-Key": g.alice}},
		{name: "alice's in the query", query: "api_key=" + g.alice + "&key=" + g.alice},
	}
	var calls []call
	for _, kind := range bobsProbes(fx) {
		for _, p := range kind.probes {
			calls = append(calls, p.req(kind.id))
		}
	}
	calls = append(calls, call{method: "GET", path: "/v1/containers"}, call{method: "GET", path: "/v1/files"},
		call{method: "GET", path: "/v1/models"}, call{method: "GET", path: "/v1/nothing-here"}, call{method: "GET", path: "/"},
		call{method: "POST", path: "/v1/containers", body: `{"name": "free"}`},
		call{method: "POST", path: "/v1/chat/completions", body: `{"model": "test-model", "messages": [{"role": "user", "content": "free tokens"}]}`})
	var first *reply
	for _, k := range bad {
		for _, c := range calls {
			c.header = k.header
			if k.query != "" {
				sep := "?"
				if strings.Contains(c.path, "?") {
					sep = "&"
				}
				c.path += sep + k.query
			}
			got := g.do(t, c, k.auth...)
			if first == nil {
				first = &got
			}
			if got.status != http.StatusUnauthorized || got.body != first.body {
				t.Errorf("%s, %s %s: %d %s; want the 401 every request without a valid key gets", k.name, c.method, c.path, got.status, got.body)
			}
		}
	}
	if e, ok := first.apiError(); !ok || e.Code == nil || *e.Code != "invalid_api_key" {
		t.Errorf("the 401 is %s; want OpenAI's invalid_api_key error", first.body)
	}
}

// serveIntact checks, after every attack, that alice's objects are as she
// left them: nothing bob or a bad key sent deleted, changed or added
// anything.
func serveIntact(t *testing.T, fx *serveFixture) {
	ctx := sdkContext(t)
	alice := fx.g.client(fx.g.alice)
	if c, err := alice.Containers.Get(ctx, fx.container); err != nil || c.Name != "alice's" {
		t.Errorf("alice's container: %+v, %v", c, err)
	}
	list, err := alice.Containers.Files.List(ctx, fx.container, openai.ContainerFileListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range list.Data {
		paths = append(paths, f.Path)
	}
	slices.Sort(paths)
	if !slices.Equal(paths, []string{"/mnt/data/alice.csv", "/mnt/data/notes.txt", "/mnt/data/out.txt"}) {
		t.Errorf("alice's container holds %q; want her alice.csv, notes.txt and out.txt", paths)
	}
	for _, f := range []struct {
		what string
		get  func() (*http.Response, error)
	}{
		{"container file", func() (*http.Response, error) {
			return alice.Containers.Files.Content.Get(ctx, fx.container, fx.containerFile)
		}},
		{"file", func() (*http.Response, error) { return alice.Files.Content(ctx, fx.file) }},
	} {
		resp, err := f.get()
		if err != nil {
			t.Errorf("alice's %s: %v", f.what, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != fx.secret {
			t.Errorf("alice's %s holds %q (%v), want %q", f.what, b, err, fx.secret)
		}
	}
	if r, err := alice.Responses.Get(ctx, fx.response, responses.ResponseGetParams{}); err != nil || r.ID != fx.response {
		t.Errorf("alice's response: %v", err)
	}
}
