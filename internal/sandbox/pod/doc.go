// Package pod runs the model's code directly, with no isolation of its own,
// for `terp sandbox serve --isolation pod` inside a Kubernetes pod that is
// already the sandbox: one pod per conversation (an agent-sandbox
// SandboxClaim), a non-root uid, a read-only root filesystem, /work on an
// emptyDir, egress cut by the template's NetworkPolicy and, where the
// cluster offers it, gVisor or Kata as the pod's runtime. bubblewrap would
// need user namespaces and mounts, which such a pod rightly does not grant.
//
// What this package still enforces inside the pod:
//
//   - rlimits on every command (prlimit(1) from util-linux): address space
//     (Limits.MemoryBytes), processes of the uid (Limits.Processes), the
//     largest file (Limits.FileSizeBytes), no core dumps. The container's
//     memory and pids limits, set in the SandboxTemplate, are the hard
//     bounds; the rlimits keep one command from taking all of them.
//   - output bounds while it is read (sandbox.Capture), the per-command
//     timeout killing the command's process group, and the /work watch
//     (Limits.WorkBytes, sandbox.WorkWatch).
//   - an environment built from scratch: nothing of the server's (the
//     bearer token, Kubernetes' service variables) reaches the code.
//   - files only through sandbox.WorkFiles, which never follows a link the
//     code left.
//
// What it leaves to the pod: the network (a NetworkPolicy; the backend
// refuses the allowlist and full modes rather than pretend to enforce
// them), seccomp (the pod's securityContext.seccompProfile: RuntimeDefault),
// capabilities (drop ALL), /mnt/data (a second mount of the /work volume).
// A process that leaves its process group (setsid) outlives its command's
// timeout, but not Pause or Close, which kill every other process of the
// uid when Config.KillStrays is set, as it is in a pod.
//
// It refuses to run as root: in a pod the image's uid is 1000 and
// runAsNonRoot holds it there.
package pod
