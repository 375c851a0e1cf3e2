package cli

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/llm/llmtest"
	"github.com/terpdev/terp/internal/postgres/pgtest"
	"github.com/terpdev/terp/internal/terptest"
)

// LibreChat's own client against terp serve (issue 32): the execute_code
// tool of @librechat/agents, which LibreChat's agents run code with, made
// and invoked as LibreChat's ToolNode does, with no model. Both
// generations: 3.1.63 sends X-API-Key (TestLibreChatClient,
// testdata/node/librechat.mjs); the newest, on Node.js 24, sends the token
// LibreChat signs, which the script signs as LibreChat does
// (TestLibreChatSignedClient, testdata/node24/librechat.mjs).
// TestLibreChatSignedToken checks the flags' wiring without Node.

const libreChatScript = "librechat.mjs"

// nodeClients24 holds the clients that need Node.js 24.
const nodeClients24 = "../../testdata/node24"

var libreChatID = regexp.MustCompile(`^[A-Za-z0-9_-]{21}$`)

// libreChatKeys are the keys of the server the LibreChat tests start.
const (
	libreChatAlice = "alice-librechat-key-0123456789"
	libreChatBob   = "bob-librechat-key-0123456789"
)

// startTerpLibreChat starts terp serve with alice's and bob's keys, and
// args; it returns its address (http://HOST:PORT).
func startTerpLibreChat(t *testing.T, args ...string) string {
	t.Helper()
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("alice "+libreChatAlice+"\nbob "+libreChatBob+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := homeEnv(t, serverEnv(llmtest.New(t)))
	p := startProcess(t, env, `serving the OpenAI API on (http://\S+)/v1`,
		append([]string{"serve", "--listen", "127.0.0.1:0", "--keys-file", keys}, args...)...)
	return p.base
}

// libreChatRun is what the script saw of one invocation of the tool.
type libreChatRun struct {
	Content  string `json:"content"`
	Error    string `json:"error"`
	Artifact *struct {
		SessionID string `json:"session_id"`
		Files     []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"files"`
	} `json:"artifact"`
}

type libreChatDownload struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
}

type libreChatSummary struct {
	Write, Again, Fallback, Image, Bash, WrongKey, Unsupported, Bob, Stranger libreChatRun
	Download, BobDownload                                                     *libreChatDownload
	ImageDownload                                                             *struct {
		Status int  `json:"status"`
		PNG    bool `json:"png"`
	} `json:"imageDownload"`
	Session struct {
		SessionID string `json:"session_id"`
		Files     []struct {
			ID, Name  string
			SessionID string `json:"session_id"`
		} `json:"files"`
	} `json:"session"`
}

func TestLibreChatClient(t *testing.T) {
	node := terptest.Node(t, nodeClients, "@librechat/agents", "node-fetch")
	base := startTerpLibreChat(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, libreChatScript)
	cmd.Dir = nodeClients
	cmd.Env = append(os.Environ(), "LIBRECHAT_CODE_BASEURL="+base+"/librechat/v1", "ALICE_KEY="+libreChatAlice, "BOB_KEY="+libreChatBob)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", libreChatScript, err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var s libreChatSummary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("%s printed %q: %v", libreChatScript, stdout.String(), err)
	}
	t.Logf("what the model would read of each run: %s", lines[len(lines)-1])

	// The first run writes /mnt/data: the model reads its output and the
	// file, which LibreChat delivers.
	if !strings.Contains(s.Write.Content, "stdout:\nwrote the report") ||
		!strings.Contains(s.Write.Content, "- /mnt/data/report.txt | File is already downloaded by the user") {
		t.Errorf("the first run, as the model reads it: %+v", s.Write)
	}
	if a := s.Write.Artifact; a == nil || !libreChatID.MatchString(a.SessionID) || len(a.Files) != 1 || !libreChatID.MatchString(a.Files[0].ID) {
		t.Errorf("the first run's artifact: %+v", s.Write.Artifact)
	}
	// The second, in the same session through the file references: the
	// file is there, the variable is not (a new process), and nothing is
	// reported as written.
	if s.Again.Content != "stdout:\nrows: 3\nsecret is gone" {
		t.Errorf("the second run: %+v", s.Again)
	}
	if s.Again.Artifact == nil || s.Write.Artifact == nil || s.Again.Artifact.SessionID != s.Write.Artifact.SessionID {
		t.Errorf("the second run's session: %+v, the first's %+v", s.Again.Artifact, s.Write.Artifact)
	}
	if s.Download == nil || s.Download.Status != 200 || s.Download.Body != "rows: 3" {
		t.Errorf("LibreChat's download of report.txt: %+v", s.Download)
	}
	// The tool's fallback when it has a session and no files: /files.
	if s.Fallback.Content != "stdout:\nROWS: 3" {
		t.Errorf("a run with the session's id only: %+v", s.Fallback)
	}
	if !strings.Contains(s.Image.Content, "- /mnt/data/squares.png | Image is already displayed to the user") {
		t.Errorf("a plot, as the model reads it: %+v", s.Image)
	}
	if s.ImageDownload == nil || s.ImageDownload.Status != 200 || !s.ImageDownload.PNG {
		t.Errorf("LibreChat's download of the plot: %+v", s.ImageDownload)
	}
	if s.Bash.Content != "stdout:\n7" {
		t.Errorf("bash: %+v", s.Bash)
	}
	if !strings.Contains(s.WrongKey.Error, "status: 401") {
		t.Errorf("a wrong key: %+v", s.WrongKey)
	}
	if !strings.Contains(s.Unsupported.Error, "status: 400") {
		t.Errorf("lang js: %+v", s.Unsupported)
	}
	// Bob's tool, sent alice's session and files, reaches none of them.
	if !strings.Contains(s.Bob.Content, "stdout:\n[]") || !strings.Contains(s.Bob.Content, "is not kept any more, or never was") ||
		s.Bob.Artifact == nil || s.Write.Artifact == nil || s.Bob.Artifact.SessionID == s.Write.Artifact.SessionID {
		t.Errorf("bob's run with alice's files: %+v", s.Bob)
	}
	if s.BobDownload == nil || s.BobDownload.Status != http.StatusNotFound {
		t.Errorf("bob's download of alice's file: %+v", s.BobDownload)
	}
}

// Newer LibreChat signs a token for each request rather than send a key:
// terp serve --librechat-jwt-key takes it, the tenant mapped to a key.
func TestLibreChatSignedToken(t *testing.T) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	pemPath := filepath.Join(t.TempDir(), "librechat.pub")
	if err := os.WriteFile(pemPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startTerpLibreChat(t, "--librechat-jwt-key", pemPath, "--librechat-jwt-kid", "lc-1", "--librechat-jwt-tenant", "*=alice")
	now := time.Now().Unix()
	token := signLibreChatToken(t, key, map[string]any{"iss": "librechat", "aud": "codeapi", "sub": "user_123", "iat": now, "nbf": now,
		"exp": now + 300, "jti": "jti_123", "tenant_id": "tenant_abc", "role": "USER", "principal_source": "librechat_jwt"})
	exec := func(header, value string) (int, map[string]any) {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", base+"/librechat/v1/exec",
			strings.NewReader(`{"lang":"py","code":"open('/mnt/data/t.txt','w').write('hi'); print('by token')"}`))
		req.Header.Set(header, value)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return resp.StatusCode, out
	}
	status, out := exec("Authorization", "Bearer "+token)
	if status != 200 || out["stdout"] != "by token\n" {
		t.Fatalf("a signed token: %d %v", status, out)
	}
	// The tenant is alice's key: her key downloads the file.
	files, _ := out["files"].([]any)
	if len(files) != 1 {
		t.Fatalf("files: %v", out)
	}
	f, _ := files[0].(map[string]any)
	req, _ := http.NewRequestWithContext(context.Background(), "GET", base+"/librechat/v1/download/"+out["session_id"].(string)+"/"+f["id"].(string), nil)
	req.Header.Set("X-API-Key", libreChatAlice)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hi" {
		t.Fatalf("alice's download of the token's file: %d %q", resp.StatusCode, b)
	}
	if status, out := exec("Authorization", "Bearer "+token[:len(token)-4]+"AAAA"); status != 401 || !strings.Contains(out["error"].(string), "signature") {
		t.Fatalf("a token signed by no key of the server's: %d %v", status, out)
	}
}

// signLibreChatToken signs claims as LibreChat does: EdDSA, kid lc-1.
func signLibreChatToken(t *testing.T, key crypto.Signer, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(map[string]string{"alg": "EdDSA", "typ": "JWT", "kid": "lc-1"}) + "." + enc(claims)
	sig, err := key.Sign(rand.Reader, []byte(input), crypto.Hash(0))
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// writeKeyPair writes priv's private key (PKCS #8) and public key (PKIX) as
// PEM files in dir, named name.key and name.pub, and returns their paths.
func writeKeyPair(t *testing.T, dir, name string, priv crypto.Signer) (privPath, pubPath string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	privPath, pubPath = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if err := os.WriteFile(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return privPath, pubPath
}

// The newest @librechat/agents sends LibreChat's signed tokens and the
// newer file references: alice's tenant signs with Ed25519, bob's with
// RSA, both trusted (one PEM file holds both public keys); a stranger's
// key is not.
func TestLibreChatSignedClient(t *testing.T) {
	node := terptest.NodeAtLeast(t, nodeClients24, terptest.Node24Min, "@librechat/agents", "node-fetch")
	dir := t.TempDir()
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, strangerKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	alicePriv, alicePub := writeKeyPair(t, dir, "alice", edKey)
	bobPriv, bobPub := writeKeyPair(t, dir, "bob", rsaKey)
	strangerPriv, _ := writeKeyPair(t, dir, "stranger", strangerKey)
	trusted := filepath.Join(dir, "librechat.pub")
	var both []byte
	for _, p := range []string{alicePub, bobPub} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		both = append(both, b...)
	}
	if err := os.WriteFile(trusted, both, 0o600); err != nil {
		t.Fatal(err)
	}
	base := startTerpLibreChat(t, "--librechat-jwt-key", trusted, "--librechat-jwt-kid", "librechat-1",
		"--librechat-jwt-tenant", "acme=alice", "--librechat-jwt-tenant", "initech=bob")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, libreChatScript)
	cmd.Dir = nodeClients24
	cmd.Env = append(os.Environ(), "LIBRECHAT_CODE_BASEURL="+base+"/librechat/v1", "TOKEN_KID=librechat-1",
		"ALICE_SIGNING_KEY="+alicePriv, "ALICE_TENANT=acme", "BOB_SIGNING_KEY="+bobPriv, "BOB_TENANT=initech",
		"STRANGER_SIGNING_KEY="+strangerPriv)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", libreChatScript, err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var s libreChatSummary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		t.Fatalf("%s printed %q: %v", libreChatScript, stdout.String(), err)
	}
	t.Logf("what the model would read of each run: %s\nthe library's log:\n%s", lines[len(lines)-1], stderr.String())

	if !strings.HasPrefix(s.Write.Content, "stdout:\nwrote the report") ||
		!strings.Contains(s.Write.Content, "Session files: 1 persisted file(s) are available in /mnt/data, including 0 image(s)") {
		t.Errorf("the first run, as the model reads it: %+v", s.Write)
	}
	if a := s.Write.Artifact; a == nil || !libreChatID.MatchString(a.SessionID) || len(a.Files) != 1 {
		t.Errorf("the first run's artifact: %+v", s.Write.Artifact)
	}
	if s.Again.Content != "stdout:\nrows: 3\nsecret is gone" {
		t.Errorf("the second run, with the newer file references: %+v", s.Again)
	}
	if s.Download == nil || s.Download.Status != 200 || s.Download.Body != "rows: 3" {
		t.Errorf("LibreChat's download of report.txt with a token: %+v", s.Download)
	}
	if !strings.Contains(s.Image.Content, "including 1 image(s)") {
		t.Errorf("a plot, as the model reads it: %+v", s.Image)
	}
	if s.ImageDownload == nil || s.ImageDownload.Status != 200 || !s.ImageDownload.PNG {
		t.Errorf("LibreChat's download of the plot: %+v", s.ImageDownload)
	}
	if !strings.Contains(s.Stranger.Error, "Code execution is not authorized") {
		t.Errorf("a token signed by a key terp does not trust: %+v", s.Stranger)
	}
	if !strings.Contains(s.Unsupported.Error, "The code execution request was rejected") {
		t.Errorf("lang r: %+v", s.Unsupported)
	}
	if !strings.Contains(s.Bob.Content, "stdout:\n[]") || s.Bob.Artifact == nil || s.Write.Artifact == nil ||
		s.Bob.Artifact.SessionID == s.Write.Artifact.SessionID {
		t.Errorf("bob's tenant with alice's files: %+v", s.Bob)
	}
	if s.BobDownload == nil || s.BobDownload.Status != http.StatusNotFound {
		t.Errorf("bob's tenant's download of alice's file: %+v", s.BobDownload)
	}
}

// The token flags are checked before anything starts: each mistake is a
// usage error (exit 2) that says what to give.
func TestServeRefusesLibreChatTokenMistakes(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte("alice "+libreChatAlice+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	private := filepath.Join(dir, "private.pem")
	if err := os.WriteFile(private, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	_, public := writeKeyPair(t, dir, "librechat", key)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--librechat-jwt-tenant", "*=alice"}, "need --librechat-jwt-key"},
		{[]string{"--librechat-jwt-key", private}, "never its private one"},
		{[]string{"--librechat-jwt-key", public, "--librechat-jwt-tenant", "acme"}, "give TENANT=NAME"},
		{[]string{"--librechat-jwt-key", public, "--librechat-jwt-tenant", "acme=mallory"}, "no key is named mallory (alice)"},
		{[]string{"--librechat-jwt-key", public, "--librechat-jwt-audience", ""}, "cannot be empty"},
	} {
		r := terp(t, nil, "", append([]string{"serve", "--keys-file", keys}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("terp serve %s: exit %d, stderr:\n%s\nwant exit 2 with %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
}

// postLibreChatExec sends an exec to the server at base (http://HOST:PORT)
// as LibreChat does, and decodes its answer.
func postLibreChatExec(t *testing.T, base, key string, req map[string]any) (int, libreChatExec) {
	t.Helper()
	b, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(context.Background(), "POST", base+"/librechat/v1/exec", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("User-Agent", "LibreChat/1.0")
	hr.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out libreChatExec
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

type libreChatExec struct {
	SessionID string `json:"session_id"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	Files     []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"files"`
}

// Two replicas share a PostgreSQL database and a `terp sandbox serve`: a
// session's exec that reaches the other replica is forwarded to the one
// its sandbox is open in, files download from either, and when the first
// is killed the other takes the session over with its files.
func TestLibreChatReplicasOnPostgres(t *testing.T) {
	db := pgtest.URL(t)
	s := llmtest.New(t)
	const token = "sandbox-token-0123456789"
	sandboxes := startProcess(t, homeEnv(t, map[string]string{"CPUOS_API_KEY": token}),
		`serving sandboxes on (http://\S+)`, "sandbox", "serve", "--listen", "127.0.0.1:0")
	replica := func() *serveProcess {
		env := serverEnv(s)
		env["TERP_SANDBOX"], env["TERP_CPUOS_URL"], env["CPUOS_API_KEY"] = "cpuos", sandboxes.base, token
		return startProcess(t, homeEnv(t, env), `serving the OpenAI API on (http://\S+)/v1`,
			"serve", "--listen", "127.0.0.1:0", "--no-auth", "--store", db)
	}
	a, b := replica(), replica()
	status, first := postLibreChatExec(t, a.base, "", map[string]any{"lang": "py", "code": "open('/mnt/data/n.txt', 'w').write('on a')"})
	if status != 200 || len(first.Files) != 1 {
		t.Fatalf("on a: %d %+v\n%s", status, first, a.log)
	}
	refs := []map[string]string{{"id": first.Files[0].ID, "name": "n.txt", "session_id": first.SessionID}}
	status, again := postLibreChatExec(t, b.base, "", map[string]any{"lang": "py", "files": refs, "code": "print(open('/mnt/data/n.txt').read())"})
	if status != 200 || again.SessionID != first.SessionID || again.Stdout != "on a\n" {
		t.Fatalf("sent to b: %d %+v\na:\n%s\nb:\n%s", status, again, a.log, b.log)
	}
	resp, err := http.Get(b.base + "/librechat/v1/download/" + first.SessionID + "/" + first.Files[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "on a" {
		t.Fatalf("download from b: %d %q", resp.StatusCode, body)
	}
	_ = a.stop(t, syscall.SIGKILL)
	status, taken := postLibreChatExec(t, b.base, "", map[string]any{"lang": "py", "files": refs, "code": "print(open('/mnt/data/n.txt').read(), 'on b')"})
	if status != 200 || taken.SessionID != first.SessionID || taken.Stdout != "on a on b\n" {
		t.Fatalf("on b after a was killed: %d %+v\nb:\n%s", status, taken, b.log)
	}
}
