package openaiapi

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/serve/state"
)

// pngBytes is the smallest PNG a browser decodes: one transparent pixel.
var pngBytes, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")

// An input_image, as a data URL or a stored file's id, is put in /work and
// shown to the model; one named by URL is fetched only as the container's
// network policy allows, and refused clearly otherwise.
func TestResponsesInputImages(t *testing.T) {
	s := llmtest.New(t, llmtest.Fixed(llmtest.Answer("A pixel.")), llmtest.Fixed(llmtest.Answer("The same pixel.")))
	ts := newTestServer(t, s)
	client := ts.client(aliceKey)
	f, err := client.Files.New(ctx(t), openai.FileNewParams{File: openai.File(strings.NewReader(string(pngBytes)), "pixel.png", "image/png"), Purpose: openai.FilePurposeUserData})
	if err != nil {
		t.Fatal(err)
	}
	dataURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes)
	post := func(input string, network string) (int, string) {
		body := `{"model": "test-model", "input": [{"role": "user", "content": [{"type": "input_text", "text": "What is it?"}, ` + input + `]}],
			"tools": [{"type": "code_interpreter", "container": {"type": "auto"` + network + `}}]}`
		req, _ := http.NewRequest("POST", ts.URL+"/v1/responses", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, part := range []string{`{"type": "input_image", "image_url": "` + dataURL + `"}`, `{"type": "input_image", "file_id": "` + f.ID + `"}`} {
		if status, body := post(part, ""); status != http.StatusOK {
			t.Fatalf("%s: %d %s", part, status, body)
		}
		asked := s.Requests()[i]
		last := asked.Messages[len(asked.Messages)-1]
		if len(last.Images) != 1 || last.Images[0] != dataURL {
			t.Errorf("%.60s: the model was shown %.60q; want the image", part, last.Images)
		}
		if system := asked.Messages[0].Content; !strings.Contains(system, "/image_1.png (70 bytes)") && !strings.Contains(system, "/pixel.png (70 bytes)") {
			t.Errorf("%.60s: the model was not told of the file: %q", part, system)
		}
	}
	for network, want := range map[string]string{
		"": "the container has no network",
		`, "network_policy": {"type": "allowlist", "allowed_domains": ["example.com"]}`: "not in the sandbox's allowlist",
	} {
		status, body := post(`{"type": "input_image", "image_url": "http://images.internal/a.png"}`, network)
		var got struct {
			Error struct{ Message, Param string }
		}
		_ = json.Unmarshal([]byte(body), &got)
		if status != http.StatusBadRequest || got.Error.Param != "input[0].content[1].image_url" || !strings.Contains(got.Error.Message, want) {
			t.Errorf("network%s: %d %s; want 400 saying %q", network, status, body, want)
		}
	}
	if n := len(s.Requests()); n != 2 {
		t.Errorf("the model was asked %d times; the refused requests asked it nothing", n)
	}
}

// An image named by URL is fetched when the network policy lets the
// server reach it: saved under the type it is, and shown; what is not an
// image is refused.
func TestFetchImages(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/page" {
			_, _ = w.Write([]byte("<html>not an image</html>"))
			return
		}
		_, _ = w.Write(pngBytes)
	}))
	t.Cleanup(srv.Close)
	files := []namedFile{{name: "image_1", fetch: srv.URL + "/x", param: "p"}}
	if perr := fetchImages(ctx(t), state.Network{Type: "full"}, files); perr != nil {
		t.Fatal(perr)
	}
	if files[0].name != "image_1.png" || string(files[0].data) != string(pngBytes) || !strings.HasPrefix(files[0].image, "data:image/png;base64,") {
		t.Errorf("fetched %+v", files[0])
	}
	page := []namedFile{{name: "image_1", fetch: srv.URL + "/page", param: "p"}}
	if perr := fetchImages(ctx(t), state.Network{Type: "full"}, page); perr == nil || !strings.Contains(perr.message, "not a PNG") {
		t.Errorf("a page fetched as an image: %v", perr)
	}
}
