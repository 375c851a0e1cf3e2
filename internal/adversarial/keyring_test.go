package adversarial

import (
	"testing"

	"golang.org/x/sys/unix"
)

// keyName is the description of a key the test adds to its own session
// keyring, which bwrap's children inherit: the code must not find it.
var keyName = "terp-adversarial-" + randomHex()

func plantKey(t *testing.T) {
	t.Helper()
	id, err := unix.AddKey("user", keyName, []byte(host.secret), unix.KEY_SPEC_SESSION_KEYRING)
	if err != nil {
		t.Logf("cannot add a key to the session keyring (%v); keyctl case only checks the sandbox side", err)
		return
	}
	t.Logf("planted key %d (%s) in the test's session keyring", id, keyName)
	t.Cleanup(func() { _, _ = unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_SESSION_KEYRING, 0, 0) })
}
