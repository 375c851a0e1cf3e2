package local

import (
	"fmt"
	"strings"
)

// bwrapFailures are the well-known reasons bubblewrap cannot start a
// sandbox, recognized by what bwrap prints, each with what the user can do.
// The first match wins, so the more specific texts come first.
var bwrapFailures = []struct {
	says    []string // any of these, in bwrap's message
	problem string
	fix     string
}{
	{
		// Ubuntu 23.10 and later, Debian 13's AppArmor: unprivileged user
		// namespaces get a profile without capabilities, so writing the
		// uid map (or configuring loopback) fails.
		says:    []string{"setting up uid map: Permission denied", "loopback: Failed RTM_NEWADDR"},
		problem: "AppArmor forbids bubblewrap's user namespace (kernel.apparmor_restrict_unprivileged_userns=1, the default on Ubuntu 23.10 and later)",
		fix: "give bwrap an AppArmor profile that allows it (`sudo apt-get install apparmor-profiles` and " +
			"`sudo ln -s /usr/share/apparmor/extra-profiles/bwrap-userns-restrict /etc/apparmor.d/ && sudo apparmor_parser -r /etc/apparmor.d/bwrap-userns-restrict`), " +
			"or allow it system-wide with `sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`, or use `--sandbox docker`",
	},
	{
		says:    []string{"No permissions to create new namespace"},
		problem: "the kernel does not allow unprivileged user namespaces",
		fix: "allow them with `sudo sysctl kernel.unprivileged_userns_clone=1` (Debian before 11) or " +
			"`sudo sysctl user.max_user_namespaces=15000`, or use `--sandbox docker`",
	},
	{
		says:    []string{"Creating new namespace failed: No space left on device"},
		problem: "the limit on user namespaces is reached or zero (user.max_user_namespaces)",
		fix:     "raise it with `sudo sysctl user.max_user_namespaces=15000`, or use `--sandbox docker`",
	},
	{
		says: []string{"Creating new namespace failed: Operation not permitted", "Creating new namespace failed: Permission denied",
			"unshare failed: Operation not permitted"},
		problem: "this machine refuses new namespaces to terp: terp most likely runs inside a container whose seccomp profile or security policy forbids them",
		fix: "run terp on the host, or start its container with `--security-opt seccomp=unconfined --security-opt apparmor=unconfined`, " +
			"or use `--sandbox docker` against the host's daemon, or `--sandbox cpuos`",
	},
	{
		says:    []string{"Can't mount proc on /newroot/proc"},
		problem: "bubblewrap cannot mount /proc: terp most likely runs inside a container that masks parts of its /proc",
		fix:     "start terp's container with `--security-opt systempaths=unconfined` (Docker) or `--security-opt unmask=/proc/*` (Podman), or use `--sandbox docker` against the host's daemon",
	},
	{
		says:    []string{"Unexpected capabilities but not setuid"},
		problem: "the bwrap binary carries file capabilities, which bubblewrap refuses",
		fix:     "remove them with `sudo setcap -r $(command -v bwrap)`, or reinstall bubblewrap",
	},
	{
		says:    []string{"setuid use of bubblewrap is not supported", "Can't find source path"},
		problem: "bubblewrap is installed setuid, or cannot reach the sandbox's files as the user it runs as",
		fix:     "install Debian's or Ubuntu's bubblewrap (not setuid), and keep terp's data directory where its user can reach it",
	},
}

// explainBwrap turns what bwrap printed when it could not make a sandbox
// into a SetupError that says what is wrong and what to do, or returns nil
// for a message it does not know.
func explainBwrap(msg string, cause error) *SetupError {
	for _, f := range bwrapFailures {
		for _, s := range f.says {
			if strings.Contains(msg, s) {
				return &SetupError{
					Problem: fmt.Sprintf("bubblewrap cannot create a sandbox here: %s (bwrap said: %s)", f.problem, firstLine(msg)),
					Fix:     f.fix,
					Err:     cause,
				}
			}
		}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
