package docker

import (
	"encoding/json"
	"slices"
	"sync"

	"github.com/moby/profiles/seccomp"
)

// Docker's default seccomp profile lets a process trace others of its uid
// (ptrace and friends are allowed from kernel 4.8), and every process of the
// code runs as the sandbox's user: one step's code could attach to the
// persistent kernel's worker or to another command. terp runs its containers
// under Docker's own default profile with these calls taken out, as its
// bubblewrap sandbox's filter does. Everything else the default profile
// allows or denies stays as Docker's maintainers keep it.
var deniedSyscalls = []string{
	"ptrace",            // attach to, read and write another process
	"process_vm_readv",  // read another process's memory
	"process_vm_writev", // write another process's memory
	"pidfd_getfd",       // take another process's file descriptors
}

// seccompProfile is the profile as the daemon takes it in SecurityOpt
// ("seccomp=" + the JSON). Calls not allowed by any rule get the profile's
// default action, an error.
var seccompProfile = sync.OnceValues(func() (string, error) {
	p := seccomp.DefaultProfile()
	rules := p.Syscalls[:0]
	for _, r := range p.Syscalls {
		r.Names = slices.DeleteFunc(r.Names, func(n string) bool { return slices.Contains(deniedSyscalls, n) })
		if len(r.Names) > 0 {
			rules = append(rules, r)
		}
	}
	p.Syscalls = rules
	b, err := json.Marshal(p)
	return string(b), err
})
