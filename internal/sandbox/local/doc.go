// Package local runs the model's code on this machine inside bubblewrap
// (bwrap), the unprivileged sandbox Flatpak uses. It is terp's default
// backend: nothing to start, no image to build, and a command costs about
// 15 ms more than running python3 directly (see the benchmarks).
//
// Each sandbox is a host directory, <Root>/<id>, whose work/ subdirectory is
// bound read-write at /work. Every command is a fresh bwrap invocation that
// sees only:
//
//   - the host's /usr, read-only, with /bin, /lib, /lib64 and /sbin as on the
//     host (symlinks into /usr on merged-usr systems);
//   - the few files of /etc that Python, OpenBLAS and matplotlib read (the
//     dynamic linker cache, /etc/alternatives through which Debian resolves
//     BLAS, fonts, matplotlibrc, the time zone), and a synthesized passwd,
//     group, hosts and nsswitch.conf with one unprivileged user;
//   - fresh /proc, /dev, /tmp and /dev/shm, and the sandbox's own /work.
//
// All namespaces are unshared (so there is no network unless
// sandbox.Options.Network asks for it), the command runs as uid 1000 with no
// capabilities, in a new session, with an environment built from scratch. The
// host's $HOME, /root, /home, other sandboxes and terp's own data are not
// mounted at all, so there is nothing to hide from the code.
//
// A command line looks like this (see Sandbox.Argv):
//
//	bwrap --unshare-all --unshare-user --uid 1000 --gid 1000 --disable-userns \
//	  --die-with-parent --new-session --clearenv --cap-drop ALL --hostname terp \
//	  --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
//	  --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin \
//	  --ro-bind-try /etc/ld.so.cache /etc/ld.so.cache ... \
//	  --ro-bind <Root>/<id>/etc/passwd /etc/passwd ... \
//	  --proc /proc --dev /dev --size 2147483648 --tmpfs /tmp \
//	  --size 2147483648 --tmpfs /dev/shm --bind <Root>/<id>/work /work \
//	  --remount-ro / --chdir /work --setenv HOME /tmp --setenv PATH /usr/bin:/bin ... \
//	  -- /usr/bin/python3 main.py
//
// When terp runs it, it adds --json-status-fd and --block-fd: bwrap reports
// the host pid of the sandbox's init and waits, terp applies the resource
// limits to that process (rlimits, and the cgroup on cgroup v1), and only then
// lets the command start, so no code ever runs unlimited.
//
// It also adds --seccomp with a pipe holding a seccomp filter compiled in Go
// (seccomp.go): a Flatpak-style deny list that refuses namespaces, mounts,
// keyrings, ptrace, perf, bpf, io_uring, terminal injection and socket
// families other than Unix and IP. A bubblewrap without --seccomp runs
// without it; see Backend.Seccomp.
//
// Resource limits come from cgroups where terp may create them (cgroup v2, or
// cgroup v1, as on hosts that still mount it) and from rlimits otherwise;
// see Backend.LimitsMechanism.
package local
