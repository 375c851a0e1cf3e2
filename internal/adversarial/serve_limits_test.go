package adversarial

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// These cases send terp serve more than its limits take, and slower than
// its timeouts allow, on the real binary (startServe, as root and as
// nobody).

// addr is the host:port g listens on.
func (g *gateway) addr(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(g.base)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// sendUpload posts body, a multipart upload, as alice, from r: a reader
// whose length the request does not say is sent in chunks.
func (g *gateway) sendUpload(t *testing.T, contentType string, r io.Reader) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", g.base+"/files", r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+g.alice)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("an upload: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// bigUpload is a multipart body holding a file of size bytes.
func bigUpload(size int) (contentType string, body []byte) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("purpose", "user_data")
	part, _ := mw.CreateFormFile("file", "big.bin")
	_, _ = part.Write(bytes.Repeat([]byte("x"), size))
	_ = mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

// TestServeOversizedUpload sends terp serve uploads over --max-upload,
// with their size declared, declared absurdly, and not declared (sent in
// chunks): each is refused with a 413 in OpenAI's shape, nothing of them
// stays on disk, and an upload at the cap is then taken.
func TestServeOversizedUpload(t *testing.T) {
	t.Parallel()
	g := startServe(t, llmtest.New(t), "--max-upload", "1MiB")
	refused := func(what string, r reply) {
		t.Helper()
		e, ok := r.apiError()
		if r.status != http.StatusRequestEntityTooLarge || !ok || e.Code == nil || *e.Code != "request_too_large" || !strings.Contains(e.Message, "--max-upload") {
			t.Errorf("%s: %d %s; want a 413 request_too_large naming --max-upload", what, r.status, r.body)
		}
	}
	ct, body := bigUpload(2 << 20)
	refused("2 MiB, declared", g.sendUpload(t, ct, bytes.NewReader(body)))
	// io.MultiReader hides the length: the body goes in chunks.
	refused("2 MiB in chunks", g.sendUpload(t, ct, io.MultiReader(bytes.NewReader(body))))

	// 100 GiB declared, 1 KiB sent: refused at once, before the body is
	// read; a server that waited for it would not answer before the 30 s
	// of its --body-timeout.
	conn, err := net.Dial("tcp", g.addr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
		g.alice, ct, int64(100)<<30, body[:1024])
	_ = conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("100 GiB declared: no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	refused("100 GiB declared", reply{status: resp.StatusCode, body: string(b)})

	if r := g.as(t, g.alice, call{method: "GET", path: "/v1/files"}); r.status != http.StatusOK || strings.Contains(r.body, "big.bin") {
		t.Errorf("the files after the refusals: %d %s", r.status, r.body)
	}
	if left, _ := os.ReadDir(filepath.Join(g.data, "serve", "files")); len(left) != 0 {
		t.Errorf("refused uploads left %d entries on disk", len(left))
	}
	ct, body = bigUpload(1 << 20)
	if r := g.sendUpload(t, ct, bytes.NewReader(body)); r.status != http.StatusOK || !strings.Contains(r.body, `"bytes":1048576`) {
		t.Errorf("an upload of exactly 1 MiB: %d %s", r.status, r.body)
	}
}

// TestServeSlowClients trickles headers and a body to terp serve: each
// connection is cut off soon after its timeout, the body's with a 408,
// while another client is served all along.
func TestServeSlowClients(t *testing.T) {
	t.Parallel()
	g := startServe(t, llmtest.New(t), "--header-timeout", "1s", "--body-timeout", "1s", "--idle-timeout", "1s")
	for _, tt := range []struct {
		name, start, trickle string
		// answer is how the answer starts; "" for none.
		answer string
	}{
		{"headers", "POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + g.alice + "\r\n", "X-Slow: 1\r\n", ""},
		{"body", "POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + g.alice +
			"\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"input\": \"", "x", "HTTP/1.1 408"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", g.addr(t))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			began := time.Now()
			fmt.Fprint(conn, tt.start)
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
					if _, err := io.WriteString(conn, tt.trickle); err != nil {
						return
					}
				}
			}()
			// Meanwhile another client is served.
			if r := g.as(t, g.bob, call{method: "GET", path: "/v1/containers"}); r.status != http.StatusOK {
				t.Errorf("a client beside the slow one: %d %s", r.status, r.body)
			}
			// Generous: this proves that the timeout fires, not how soon.
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			got, err := io.ReadAll(conn)
			if err != nil && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("the slow connection was never closed: %v (read %q)", err, got)
			}
			took := time.Since(began)
			if took > 15*time.Second || !strings.HasPrefix(string(got), tt.answer) || tt.answer == "" && len(got) > 0 {
				t.Errorf("closed after %v, answered %q; want %q, within the 1 s timeout and some", took, got, tt.answer)
			}
		})
	}
}
