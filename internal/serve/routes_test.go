package serve

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/llm/llmtest"
)

// A protocol registers itself and gets the host's keys, limits and logs
// without any change to the host: its clients send their key where the
// protocol says, are refused in its words, and its upload route takes a
// file larger than a request body may be.
func TestProtocolRegistersItself(t *testing.T) {
	ts := newTestHost(t, llmtest.New(t), func(c *Config) {
		c.Caps.Request, c.Caps.Upload = 1<<10, 1<<20
	})
	apiKey := func(r *http.Request) string { return r.Header.Get("X-API-Key") }
	ts.srv.Register(Protocol{
		Name:       "echo",
		Credential: apiKey,
		KeyIn:      "X-API-Key",
		Refuse: func(w http.ResponseWriter, err error) {
			w.WriteHeader(StatusOf(err))
			fmt.Fprintf(w, "echo refuses: %v", err)
		},
		Routes: []Route{
			{Pattern: "GET /echo/whoami", Handler: func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, Owner(r))
			}},
			{Pattern: "GET /echo/ping", Public: true, Handler: func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, "pong")
			}},
			{Pattern: "POST /echo/upload", Upload: true, Handler: func(w http.ResponseWriter, r *http.Request) {
				f, _, err := r.FormFile("file")
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				n, _ := io.Copy(io.Discard, f)
				fmt.Fprint(w, n)
			}},
			{Pattern: "POST /echo/body", Handler: func(w http.ResponseWriter, r *http.Request) {
				_, err := io.ReadAll(r.Body)
				if err != nil {
					refusePlainly(w, err)
					return
				}
				fmt.Fprint(w, "read")
			}},
		},
	})
	do := func(method, path string, header http.Header, body io.Reader) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx(t), method, ts.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	key := http.Header{"X-Api-Key": {aliceKey}}

	if status, body := do("GET", "/echo/whoami", key, nil); status != http.StatusOK || body != "alice" {
		t.Errorf("with its key in X-API-Key: %d %q; want 200 alice", status, body)
	}
	bearer := http.Header{"Authorization": {"Bearer " + aliceKey}}
	if status, body := do("GET", "/echo/whoami", bearer, nil); status != http.StatusUnauthorized || !strings.Contains(body, "echo refuses") || !strings.Contains(body, "X-API-Key") {
		t.Errorf("with the key where another protocol sends it: %d %q; want the protocol's own refusal naming X-API-Key", status, body)
	}
	if status, body := do("GET", "/echo/ping", nil, nil); status != http.StatusOK || body != "pong" {
		t.Errorf("a public route without a key: %d %q", status, body)
	}
	// Another protocol, without a refusal of its own, takes its key as
	// Bearer and refuses plainly.
	ts.srv.Register(Protocol{Name: "plain", Routes: []Route{{Pattern: "GET /plain", Handler: func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, Owner(r))
	}}}})
	if status, body := do("GET", "/plain", key, nil); status != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
		t.Errorf("a Bearer protocol's route with an X-API-Key: %d %q; want a 401", status, body)
	}
	if status, body := do("GET", "/plain", bearer, nil); status != http.StatusOK || body != "alice" {
		t.Errorf("a Bearer protocol's route with its key: %d %q", status, body)
	}

	// A body over the request cap is refused; the same bytes as a file
	// to the upload route are taken.
	big := bytes.Repeat([]byte("x"), 64<<10)
	if status, body := do("POST", "/echo/body", key, bytes.NewReader(big)); status != http.StatusRequestEntityTooLarge || !strings.HasPrefix(body, "echo refuses") {
		t.Errorf("a 64 KiB body over a 1 KiB cap: %d %q; want the protocol's 413", status, body)
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "big.txt")
	_, _ = fw.Write(big)
	_ = mw.Close()
	up := key.Clone()
	up.Set("Content-Type", mw.FormDataContentType())
	if status, body := do("POST", "/echo/upload", up, &form); status != http.StatusOK || body != fmt.Sprint(len(big)) {
		t.Errorf("a 64 KiB upload under a 1 MiB upload cap: %d %q", status, body)
	}
}

func TestKeyringLookup(t *testing.T) {
	ring := NewKeyring(map[string]Principal{"k1": {Name: "alice", Limits: Limits{RPM: 3}}, "k2": {Name: "bob"}}, false, Limits{})
	for _, tc := range []struct {
		credential string
		want       string
		ok         bool
	}{
		{"k1", "alice", true},
		{"k2", "bob", true},
		{"", "", false},
		{"k", "", false},
		{"k1 ", "", false},
	} {
		p, ok := ring.Lookup(tc.credential)
		if ok != tc.ok || p.Name != tc.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tc.credential, p.Name, ok, tc.want, tc.ok)
		}
	}
	for header, want := range map[string]string{"Bearer k1": "k1", "k1": "", "bearer k1": "", "Basic k1": "", "": ""} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", header)
		if got := Bearer(r); got != want {
			t.Errorf("Bearer of Authorization %q = %q; want %q", header, got, want)
		}
	}
	if ring.limits("alice").RPM != 3 {
		t.Errorf("alice's limits were not kept: %+v", ring.limits("alice"))
	}
	open := NewKeyring(nil, true, Limits{RPM: 7})
	if p, ok := open.Lookup(""); !ok || p.Name != "local" || p.Limits.RPM != 7 {
		t.Errorf("a server without keys: %+v %v; want local with its limits", p, ok)
	}
	// Keys given, no-auth is not an open door.
	if _, ok := NewKeyring(map[string]Principal{"k": {Name: "a"}}, true, Limits{}).Lookup(""); ok {
		t.Error("a server with keys took a request without one")
	}
}

// A protocol that identifies its clients itself (Protocol.Identify) names
// the principal; the host still holds the request to that principal's
// limits, and refuses a name the ring does not hold, or the protocol's own
// refusal, in the protocol's words. A request with no such proof falls
// back on the key.
func TestProtocolIdentifiesItsClients(t *testing.T) {
	ts := newTestHost(t, llmtest.New(t))
	ts.srv.Register(Protocol{
		Name:       "signed",
		Credential: func(r *http.Request) string { return r.Header.Get("X-API-Key") },
		KeyIn:      "X-API-Key",
		Identify: func(r *http.Request) (string, error) {
			switch proof := r.Header.Get("X-Proof"); proof {
			case "":
				return "", nil
			case "forged":
				return "", fmt.Errorf("the proof is forged")
			default:
				return proof, nil
			}
		},
		Refuse: func(w http.ResponseWriter, err error) {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "signed refuses: %v", err)
		},
		Routes: []Route{{Pattern: "GET /signed/whoami", Handler: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, Owner(r)) }}},
	})
	for _, tc := range []struct {
		header      http.Header
		status      int
		body, where string
	}{
		{http.Header{"X-Proof": {"bob"}}, 200, "bob", "a proof naming bob"},
		{http.Header{"X-Api-Key": {aliceKey}}, 200, "alice", "no proof, alice's key"},
		{http.Header{"X-Proof": {"mallory"}}, 401, `names "mallory", which is no key's name`, "a proof naming no key"},
		{http.Header{"X-Proof": {"forged"}, "X-Api-Key": {aliceKey}}, 401, "signed refuses: the proof is forged", "a forged proof beside a key"},
	} {
		req, _ := http.NewRequestWithContext(ctx(t), "GET", ts.URL+"/signed/whoami", nil)
		req.Header = tc.header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s: %d %q; want %d with %q", tc.where, resp.StatusCode, b, tc.status, tc.body)
		}
	}
}
