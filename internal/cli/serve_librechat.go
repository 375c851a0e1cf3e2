package cli

import (
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/terpdev/terp/internal/serve"
	"github.com/terpdev/terp/internal/serve/librechat"
)

// libreChatFlags are the settings of LibreChat's signed tokens: the public
// key that turns them on, and what their claims must say.
type libreChatFlags struct {
	keyFile  string
	kid      string
	issuer   string
	audience string
	tenants  []string
}

func addLibreChatFlags(fl *pflag.FlagSet, o *libreChatFlags) {
	fl.StringVar(&o.keyFile, "librechat-jwt-key", "", "`PATH` of the PEM file of LibreChat's public key (Ed25519 or RSA): take its signed tokens on /librechat/v1 beside keys")
	fl.StringVar(&o.kid, "librechat-jwt-kid", "", "`KID`, the key id LibreChat's tokens must name; any when not given")
	fl.StringVar(&o.issuer, "librechat-jwt-issuer", "librechat", "`ISSUER` LibreChat's tokens must name as iss")
	fl.StringVar(&o.audience, "librechat-jwt-audience", "codeapi", "`AUDIENCE` LibreChat's tokens' aud must hold")
	fl.StringArrayVar(&o.tenants, "librechat-jwt-tenant", nil, "map a token's tenant_id to a key of --keys-file, as `TENANT=NAME` (repeatable; TENANT * for any other)")
}

// jwt is the verifier of LibreChat's tokens the flags set, nil when they
// set none; a mapping to a key that keys does not hold is refused.
func (o libreChatFlags) jwt(keys map[string]serve.Principal) (*librechat.JWT, error) {
	if o.keyFile == "" {
		if o.kid != "" || len(o.tenants) > 0 {
			return nil, usagef("--librechat-jwt-kid and --librechat-jwt-tenant need --librechat-jwt-key, LibreChat's public key")
		}
		return nil, nil
	}
	if strings.TrimSpace(o.issuer) == "" || strings.TrimSpace(o.audience) == "" {
		return nil, usagef("--librechat-jwt-issuer and --librechat-jwt-audience cannot be empty: LibreChat signs iss librechat, aud codeapi")
	}
	pub, err := librechat.ReadPublicKeys(o.keyFile)
	if err != nil {
		return nil, usagef("--librechat-jwt-key: %v", err)
	}
	names := map[string]bool{}
	for _, p := range keys {
		names[p.Name] = true
	}
	j := &librechat.JWT{Keys: pub, KeyID: o.kid, Issuer: o.issuer, Audience: o.audience, Tenants: map[string]string{}}
	for _, t := range o.tenants {
		tenant, name, ok := strings.Cut(t, "=")
		switch {
		case !ok || tenant == "" || name == "":
			return nil, usagef("--librechat-jwt-tenant %q: give TENANT=NAME, NAME a key's name in --keys-file", t)
		case len(keys) > 0 && !names[name]:
			return nil, usagef("--librechat-jwt-tenant %s: no key is named %s (%s)", t, name, strings.Join(sortedNames(names), ", "))
		}
		j.Tenants[tenant] = name
	}
	return j, nil
}

func sortedNames(names map[string]bool) []string {
	return slices.Sorted(maps.Keys(names))
}
