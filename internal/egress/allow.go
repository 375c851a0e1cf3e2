package egress

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/terpdev/terp/internal/sandbox"
)

// DefaultAllow are the hosts the allowlist mode lets through when the user
// names none: the Python package index and the host its files are served
// from, so that the code can `pip install` what the sandbox lacks.
var DefaultAllow = []string{"pypi.org", "files.pythonhosted.org"}

// Allowlist matches host names against the patterns a user configured. A
// pattern is a host name ("pypi.org"), which matches only itself, or a
// wildcard ("*.example.com"), which matches every name below example.com but
// not example.com itself, as in a TLS certificate. Matching ignores case and
// a trailing dot. IP addresses are never patterns: the allowlist speaks of
// names, and an address would bypass the resolver's checks.
type Allowlist struct {
	exact  map[string]bool
	suffix []string // ".example.com" for "*.example.com"
}

// NewAllowlist checks patterns and returns their matcher.
func NewAllowlist(patterns []string) (*Allowlist, error) {
	a := &Allowlist{exact: make(map[string]bool)}
	for _, p := range patterns {
		if err := ValidPattern(p); err != nil {
			return nil, err
		}
		p = normalize(p)
		if rest, ok := strings.CutPrefix(p, "*."); ok {
			a.suffix = append(a.suffix, "."+rest)
		} else {
			a.exact[p] = true
		}
	}
	return a, nil
}

// ValidPattern reports why p cannot be an allowlist pattern, or nil.
func ValidPattern(p string) error {
	name := strings.TrimPrefix(normalize(p), "*.")
	if _, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		return fmt.Errorf("%q is an IP address; the allowlist takes host names such as pypi.org", p)
	}
	if name == "" || len(name) > 253 || strings.Contains(name, "*") {
		return fmt.Errorf("%q is not a host name or *.domain pattern", p)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q is not a host name or *.domain pattern", p)
		}
		if strings.IndexFunc(label, notHostChar) >= 0 {
			return fmt.Errorf("%q is not a host name or *.domain pattern", p)
		}
	}
	return nil
}

// notHostChar reports whether c cannot be in a (lower-cased) host name. The
// underscore is allowed: real names carry it, if not in their A records.
func notHostChar(c rune) bool {
	return (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_'
}

// Allows reports whether host (a name, without port) matches a pattern.
func (a *Allowlist) Allows(host string) bool {
	host = normalize(host)
	if a.exact[host] {
		return true
	}
	for _, s := range a.suffix {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

func normalize(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
}

// nonPublic are address ranges the proxy never connects to, beyond what
// netip's predicates cover: they reach the host, its neighbours or special
// infrastructure rather than the public internet.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: embeds an IPv4 address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds an IPv4 address
	netip.MustParsePrefix("100::/64"),        // discard
}

// Public reports whether a resolved address may be dialled: not loopback,
// private, link-local (which includes cloud metadata at 169.254.169.254),
// multicast, unspecified or reserved.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip.IsMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// Check reports why a backend cannot make a sandbox with policy n: an unknown
// mode, or an allowlist pattern that is not a host name.
func Check(n sandbox.Network) error {
	switch n.Mode {
	case "", sandbox.NetworkNone, sandbox.NetworkFull:
		return nil
	case sandbox.NetworkAllowlist:
		for _, p := range n.Allow {
			if err := ValidPattern(p); err != nil {
				return fmt.Errorf("network allowlist: %w", err)
			}
		}
		return nil
	}
	return fmt.Errorf("unknown network mode %q (want none, allowlist or full)", n.Mode)
}
