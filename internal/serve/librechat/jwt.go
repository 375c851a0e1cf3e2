package librechat

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// JWT verifies the tokens newer LibreChat signs for its code API instead
// of sending a key: Authorization: Bearer, a JWS signed with EdDSA
// (Ed25519) or RS256, whose claims are iss "librechat", aud "codeapi", sub
// (the user), iat, nbf, exp (5 minutes on), jti, tenant_id, role,
// principal_source and auth_context_hash. terp checks the signature
// against the configured public keys, the key id, the issuer, the
// audience and the times, and takes tenant_id to name the terp key whose
// limits, sessions and files the request has.
type JWT struct {
	// Keys are the public keys a token may be signed with: ed25519 for
	// EdDSA, RSA for RS256.
	Keys []crypto.PublicKey
	// KeyID, when set, is the key id (kid) a token's header must name.
	KeyID string
	// Issuer and Audience are what iss must be, and aud must hold.
	Issuer, Audience string
	// Tenants maps a token's tenant_id to the name of a terp key (a
	// principal); "*" maps any tenant not named. A tenant mapped to
	// nothing names the key of its own name.
	Tenants map[string]string
}

// TokenError is a signed token that terp does not accept, and why.
type TokenError struct{ Reason string }

func (e *TokenError) Error() string {
	return "LibreChat's token is refused: " + e.Reason
}

// skew is how far apart LibreChat's clock and this one may be.
const skew = time.Minute

// looksSigned reports whether a bearer credential is a JWS in compact
// form, rather than a key.
func looksSigned(s string) bool {
	return strings.HasPrefix(s, "eyJ") && strings.Count(s, ".") == 2
}

type tokenHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

type tokenClaims struct {
	Iss    string   `json:"iss"`
	Aud    audience `json:"aud"`
	Sub    string   `json:"sub"`
	Exp    *float64 `json:"exp"`
	Nbf    *float64 `json:"nbf"`
	Iat    *float64 `json:"iat"`
	Tenant string   `json:"tenant_id"`
}

// audience is aud, a string or a list of them.
type audience []string

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("aud is neither a string nor a list of strings")
	}
	*a = many
	return nil
}

// Principal is the name of the terp key token's tenant maps to, when the
// token is signed by one of j's keys and its claims hold at now.
func (j *JWT) Principal(token string, now time.Time) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", &TokenError{"it is not a signed JWT (three parts)"}
	}
	var h tokenHeader
	if err := decodePart(parts[0], &h); err != nil {
		return "", &TokenError{"its header: " + err.Error()}
	}
	if j.KeyID != "" && h.Kid != j.KeyID {
		return "", &TokenError{fmt.Sprintf("its key id %q is not the one terp serve --librechat-jwt-kid names", h.Kid)}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "", &TokenError{"its signature is not base64url"}
	}
	if !j.verify(h.Alg, []byte(parts[0]+"."+parts[1]), sig) {
		return "", &TokenError{fmt.Sprintf("its %s signature is not made by a key of terp serve --librechat-jwt-key", h.Alg)}
	}
	var c tokenClaims
	if err := decodePart(parts[1], &c); err != nil {
		return "", &TokenError{"its claims: " + err.Error()}
	}
	at := func(t *float64) time.Time { return time.Unix(int64(*t), 0) }
	switch {
	case c.Iss != j.Issuer:
		return "", &TokenError{fmt.Sprintf("its issuer is %q, not %q", c.Iss, j.Issuer)}
	case !slices.Contains(c.Aud, j.Audience):
		return "", &TokenError{fmt.Sprintf("its audience %q does not hold %q", []string(c.Aud), j.Audience)}
	case c.Exp == nil:
		return "", &TokenError{"it has no expiry (exp)"}
	case now.After(at(c.Exp).Add(skew)):
		return "", &TokenError{"it expired at " + at(c.Exp).UTC().Format(time.RFC3339)}
	case c.Nbf != nil && now.Add(skew).Before(at(c.Nbf)):
		return "", &TokenError{"it is not valid before " + at(c.Nbf).UTC().Format(time.RFC3339)}
	case c.Iat != nil && now.Add(skew).Before(at(c.Iat)):
		return "", &TokenError{"it was issued in the future"}
	}
	name := j.Tenants[c.Tenant]
	if name == "" {
		name = j.Tenants["*"]
	}
	if name == "" {
		name = c.Tenant
	}
	if name == "" {
		return "", &TokenError{"it names no tenant_id, and terp serve --librechat-jwt-tenant maps none with *"}
	}
	return name, nil
}

// verify reports whether sig signs input with one of j's keys, by alg;
// only EdDSA and RS256 are taken, never "none" nor a MAC.
func (j *JWT) verify(alg string, input, sig []byte) bool {
	for _, k := range j.Keys {
		switch k := k.(type) {
		case ed25519.PublicKey:
			if alg == "EdDSA" && ed25519.Verify(k, input, sig) {
				return true
			}
		case *rsa.PublicKey:
			sum := sha256.Sum256(input)
			if alg == "RS256" && rsa.VerifyPKCS1v15(k, crypto.SHA256, sum[:], sig) == nil {
				return true
			}
		}
	}
	return false
}

func decodePart(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return fmt.Errorf("not base64url")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	return nil
}

// ReadPublicKeys reads the PEM public keys (PUBLIC KEY, or RSA PUBLIC KEY)
// in path: Ed25519 or RSA, as LibreChat signs with.
func ReadPublicKeys(path string) ([]crypto.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys []crypto.PublicKey
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		var key crypto.PublicKey
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		default:
			return nil, fmt.Errorf("%s holds a %s: give LibreChat's public key (PUBLIC KEY), never its private one", path, block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		switch key.(type) {
		case ed25519.PublicKey, *rsa.PublicKey:
		default:
			return nil, fmt.Errorf("%s holds a %T key: LibreChat signs with Ed25519 or RSA", path, key)
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no PEM public key", path)
	}
	return keys, nil
}
