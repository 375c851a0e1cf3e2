//go:build !amd64 && !arm64

package local

import "errors"

// seccompFilter has no syscall table for this architecture: the sandbox
// runs without the filter and `terp doctor` says so.
func seccompFilter() ([]byte, error) {
	return nil, errors.New("no seccomp syscall table for this architecture")
}
