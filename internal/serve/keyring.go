package serve

import (
	"crypto/sha256"
	"crypto/subtle"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Keyring maps the credentials clients send to principals. Every protocol
// terp serve speaks looks its clients up here; each finds the credential
// where its own clients put it (Bearer for OpenAI's API, a token query
// parameter for Jupyter's, X-API-Key for LibreChat's), see Credential.
type Keyring struct {
	// keys are the principals by the SHA-256 of their key: every lookup
	// compares against all of them in constant time.
	keys map[[sha256.Size]byte]Principal
	// byName are the principals by name, for work that goes on after its
	// request (a turn's tokens are counted against its principal's day).
	byName map[string]Principal
	// open, when set, is the one principal of a server without keys:
	// every request is theirs, whatever it sends.
	open *Principal
	// linkKeys sign each principal's links (see links.go), by name.
	linkKeys map[string][]byte
}

// NewKeyring returns the ring of keys. With no keys and noAuth, every
// request is the principal "local", held to local.
func NewKeyring(keys map[string]Principal, noAuth bool, local Limits) *Keyring {
	k := &Keyring{keys: make(map[[sha256.Size]byte]Principal, len(keys)), byName: map[string]Principal{}, linkKeys: map[string][]byte{}}
	if noAuth && len(keys) == 0 {
		k.open = &Principal{Name: "local", Limits: local}
		k.byName["local"] = *k.open
		k.linkKeys["local"] = linkKey("")
	}
	for key, p := range keys {
		k.keys[sha256.Sum256([]byte(key))] = p
		k.byName[p.Name] = p
		k.linkKeys[p.Name] = linkKey(key)
	}
	return k
}

// linkKey is the key the principal named name signs links with.
func (k *Keyring) linkKey(name string) ([]byte, bool) {
	key, ok := k.linkKeys[name]
	return key, ok
}

// names are the principals' names.
func (k *Keyring) names() []string { return slices.Collect(maps.Keys(k.byName)) }

// Lookup is the principal whose key credential is. Every key is compared,
// in constant time, so the time taken says nothing about which one
// matched, nor how much of it.
func (k *Keyring) Lookup(credential string) (Principal, bool) {
	if k.open != nil {
		return *k.open, true
	}
	if credential == "" {
		return Principal{}, false
	}
	sum := sha256.Sum256([]byte(credential))
	var found Principal
	ok := false
	for ks, p := range k.keys {
		if subtle.ConstantTimeCompare(sum[:], ks[:]) == 1 {
			found, ok = p, true
		}
	}
	return found, ok
}

// Named is the principal named name, for a protocol that identifies its
// clients itself (Protocol.Identify); a server without keys has only its
// one principal, whatever the name.
func (k *Keyring) Named(name string) (Principal, bool) {
	if k.open != nil {
		return *k.open, true
	}
	p, ok := k.byName[name]
	return p, ok
}

// limits are the limits of the principal named name, for work that goes
// on after its request (a turn's tokens); zero for a name the ring does
// not hold.
func (k *Keyring) limits(name string) Limits { return k.byName[name].Limits }

// Credential finds the key in a request, where one protocol's clients send
// it; "" when there is none.
type Credential func(r *http.Request) string

// Bearer is the credential of an Authorization: Bearer header, where the
// OpenAI SDKs send their key.
// A header without the scheme carries no credential: a key sent bare is
// refused, never taken.
func Bearer(r *http.Request) string {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return ""
	}
	return key
}

// principal is who r comes from, for its route's protocol p: the one p
// identifies, else the one whose key p's Credential finds; an error says
// why the request is refused.
func (s *Server) principal(p *Protocol, r *http.Request) (Principal, error) {
	if p.Identify != nil {
		name, err := p.Identify(r)
		if err != nil {
			return Principal{}, err
		}
		if name != "" {
			if found, ok := s.keys.Named(name); ok {
				return found, nil
			}
			return Principal{}, &UnauthorizedError{Where: p.KeyIn, Named: name}
		}
	}
	if found, ok := s.keys.Lookup(p.Credential(r)); ok {
		return found, nil
	}
	return Principal{}, &UnauthorizedError{Where: p.KeyIn}
}

// Lookup is the principal whose key credential is, for a protocol that
// checks a key outside a request's Credential (Jupyter's login form).
func (s *Server) Lookup(credential string) (Principal, bool) { return s.keys.Lookup(credential) }
