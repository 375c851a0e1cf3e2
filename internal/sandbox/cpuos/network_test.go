package cpuos

import (
	"context"
	"strings"
	"testing"

	"github.com/terpdev/terp/internal/sandbox"
)

// The egress policy travels in the create request and the server's backend
// enforces it: in the allowlist mode the code finds the proxy bridge in its
// environment and nothing else; with none, no proxy at all.
func TestNetworkPolicyTravels(t *testing.T) {
	b, _ := serve(t)
	for _, tc := range []struct {
		net  sandbox.Network
		want string
	}{
		{sandbox.Network{}, "proxy=None"},
		{sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{"pypi.org"}}, "proxy=http://127.0.0.1:3128"},
	} {
		sbx, err := b.Create(t.Context(), sandbox.Options{Network: tc.net})
		if err != nil {
			t.Fatal(err)
		}
		res, err := sbx.Exec(t.Context(), []string{"python3", "-c", "import os; print('proxy=%s' % os.environ.get('HTTPS_PROXY'))"}, sandbox.ExecOptions{})
		_ = sbx.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Stdout, tc.want) {
			t.Errorf("%+v: stdout %q, want %q (stderr %s)", tc.net, res.Stdout, tc.want, res.Stderr)
		}
	}
	if _, err := b.Create(t.Context(), sandbox.Options{Network: sandbox.Network{Mode: sandbox.NetworkAllowlist, Allow: []string{"10.0.0.1"}}}); err == nil {
		t.Error("the server accepted an address in the allowlist")
	}
}
