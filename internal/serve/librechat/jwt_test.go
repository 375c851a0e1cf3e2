package librechat

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// signer signs tokens as LibreChat's code API client does (its
// mintCodeApiToken): a JWS in compact form, EdDSA or RS256, with a kid.
type signer struct {
	alg string
	kid string
	key crypto.Signer
}

func (s signer) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	input := enc(map[string]string{"alg": s.alg, "typ": "JWT", "kid": s.kid}) + "." + enc(claims)
	var sig []byte
	var err error
	switch s.alg {
	case "EdDSA":
		sig, err = s.key.Sign(rand.Reader, []byte(input), crypto.Hash(0))
	case "RS256":
		sum := sha256.Sum256([]byte(input))
		sig, err = s.key.Sign(rand.Reader, sum[:], crypto.SHA256)
	}
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// librechatClaims are the claims LibreChat puts in a token, for tenant,
// now.
func librechatClaims(tenant string, now time.Time) map[string]any {
	return map[string]any{"iss": "librechat", "aud": "codeapi", "sub": "65f0c0ffee0000000000abcd",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(), "jti": "7d1e4c52-3f6a-4b8e-9c0d-1e2f3a4b5c6d",
		"tenant_id": tenant, "role": "USER", "principal_source": "librechat_jwt", "auth_context_hash": strings.Repeat("b1f1c0de", 8)}
}

func newSigners(t testing.TB) (ed, rs signer, path string) {
	t.Helper()
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var pemText []byte
	for _, pub := range []crypto.PublicKey{edKey.Public(), rsKey.Public()} {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		pemText = append(pemText, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	path = filepath.Join(t.TempDir(), "librechat.pem")
	if err := os.WriteFile(path, pemText, 0o600); err != nil {
		t.Fatal(err)
	}
	return signer{"EdDSA", "lc-1", edKey}, signer{"RS256", "lc-1", rsKey}, path
}

func TestSignedTokens(t *testing.T) {
	ed, rs, path := newSigners(t)
	keys, err := ReadPublicKeys(path)
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	ts := newTestServer(t, Options{JWT: &JWT{Keys: keys, KeyID: "lc-1", Issuer: "librechat", Audience: "codeapi",
		Tenants: map[string]string{"acme": "alice"}}})
	bearer := func(token string) http.Header {
		return http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
	}
	now := time.Now()

	// A run as the tenant acme is alice's: her key finds its file.
	var run execReply
	body := `{"lang":"py","code":"open('/mnt/data/t.txt','w').write('by token')"}`
	if status, b := ts.call(t, "POST", "/exec", bearer(ed.sign(t, librechatClaims("acme", now))), strings.NewReader(body), &run); status != 200 || len(run.Files) != 1 {
		t.Fatalf("EdDSA token: %d %s", status, b)
	}
	if status, got := ts.download(t, aliceKey, run.SessionID, run.Files[0].ID); status != 200 || got != "by token" {
		t.Fatalf("alice's download of the token's file: %d %q", status, got)
	}
	if status, _ := ts.download(t, bobKey, run.SessionID, run.Files[0].ID); status != 404 {
		t.Fatalf("bob's download of it: %d", status)
	}
	// RS256 too, and a tenant of a key's own name (bob) maps to that key.
	if status, b := ts.call(t, "GET", "/download/"+run.SessionID+"/"+run.Files[0].ID, bearer(rs.sign(t, librechatClaims("acme", now))), nil, nil); status != 200 || string(b) != "by token" {
		t.Fatalf("RS256 token: %d %s", status, b)
	}
	if status, _ := ts.call(t, "GET", "/download/"+run.SessionID+"/"+run.Files[0].ID, bearer(rs.sign(t, librechatClaims("bob", now))), nil, nil); status != 404 {
		t.Fatalf("bob's token: %d", status)
	}

	_, stranger, _ := newSigners(t)
	aud := librechatClaims("acme", now)
	aud["aud"] = []string{"other", "codeapi"}
	for _, tc := range []struct {
		name   string
		token  string
		status int
		want   string
	}{
		{"an audience list", ed.sign(t, aud), 200, ""},
		{"expired", ed.sign(t, librechatClaims("acme", now.Add(-time.Hour))), 401, "expired"},
		{"another audience", ed.sign(t, withClaim(librechatClaims("acme", now), "aud", "other")), 401, "audience"},
		{"another issuer", ed.sign(t, withClaim(librechatClaims("acme", now), "iss", "someone")), 401, "issuer"},
		{"no expiry", ed.sign(t, withClaim(librechatClaims("acme", now), "exp", nil)), 401, "no expiry"},
		{"another key", stranger.sign(t, librechatClaims("acme", now)), 401, "signature"},
		{"another key id", signer{"EdDSA", "lc-2", ed.key}.sign(t, librechatClaims("acme", now)), 401, "key id"},
		{"alg none", unsigned(librechatClaims("acme", now)), 401, "signature"},
		{"a tenant without a key", ed.sign(t, librechatClaims("initech", now)), 401, `names \"initech\", which is no key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, b := ts.call(t, "GET", "/files/"+run.SessionID, bearer(tc.token), nil, nil)
			if status != tc.status || !strings.Contains(string(b), tc.want) {
				t.Fatalf("%d %s, want %d with %q", status, b, tc.status, tc.want)
			}
		})
	}
	// Keys still work beside tokens.
	if status, _ := ts.call(t, "GET", "/files/"+run.SessionID, keyHeader(aliceKey), nil, nil); status != 200 {
		t.Fatalf("alice's key beside tokens: %d", status)
	}
}

func withClaim(c map[string]any, k string, v any) map[string]any {
	if v == nil {
		delete(c, k)
		return c
	}
	c[k] = v
	return c
}

// unsigned is a token with alg none, which terp never takes.
func unsigned(claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "JWT", "kid": "lc-1"})
	c, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c) + "."
}

func TestReadPublicKeysRefusesPrivateKeys(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	path := filepath.Join(t.TempDir(), "private.pem")
	_ = os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	if _, err := ReadPublicKeys(path); err == nil || !strings.Contains(err.Error(), "never its private one") {
		t.Fatalf("a private key: %v", err)
	}
}
