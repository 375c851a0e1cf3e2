// Package docker runs the model's code in Docker containers, on this machine
// or on any host DOCKER_HOST names. It speaks the Engine API itself, over
// HTTP on the daemon's socket (engine.go), negotiating the API version with
// the daemon (a Debian 12 daemon, docker.io 20.10, speaks 1.41; terp speaks
// 1.40 to 1.56).
//
// Each sandbox is one long-lived container, started from the configured
// image with `sleep infinity` under docker-init (both as nobody, so the
// code, another user, can neither kill nor trace them), and one named volume
// mounted at /work. The container has no network (NetworkMode "none")
// unless sandbox.Options.Network asks for the full one; in the allowlist mode
// it keeps none and reaches terp's proxy through a bound Unix socket (see
// egress.go; this needs a daemon on terp's machine). It has a memory limit
// with swap equal to it (so no swap at all), a pids limit, a CPU limit and a
// file-size rlimit; every capability dropped, no-new-privileges, Docker's
// seccomp profile without ptrace (seccomp.go), a read-only root with a tmpfs
// /tmp, and a non-root user. Its environment is
// the image's plus a few variables terp sets; terp's own never enters it.
// Labels (dev.terp.sandbox, dev.terp.timeout, dev.terp.deadline) let terp
// find its containers and volumes again; the name, terp-ID-DEADLINE,
// carries the current deadline because labels cannot change.
//
// Commands are execs, wrapped so that a command and all its children can be
// killed although Docker has no way to kill an exec (see exec.go). Files
// move as tar streams through the archive endpoint into the volume (see
// files.go). Pause kills the running commands and freezes the container
// (docker pause); Resume unfreezes it from any terp process. Close removes
// the container and the volume.
package docker
