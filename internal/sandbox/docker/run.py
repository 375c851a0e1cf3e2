# run.py starts every command terp runs in a Docker sandbox:
#   python3 -I -S -c RUN_PY CMD ARGS...
# Docker cannot kill one exec, so this script makes each command a session of
# its own that terp can kill whole: it becomes the session leader (docker exec
# usually made it one already), reports the session id as the first line of
# its stdout, runs CMD as its child and, when CMD exits, kills whatever CMD
# left behind in the session. It exits with CMD's exit code, 128+signal when
# a signal killed CMD, as a shell does.
import os, signal, sys

try:
    os.setsid()
except OSError:
    pass  # already a session leader
sid = os.getsid(0)
os.write(1, b"%d\n" % sid)

# terp signals the session's members, not its leader: the leader waits.
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    # Python ignores SIGPIPE and SIGXFSZ; the command gets the defaults, so a
    # pipeline ends quietly and a file past the size limit stops its writer.
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(s, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as e:
        os.write(2, ("%s: %s\n" % (sys.argv[1], e.strerror)).encode())
        os._exit(127 if isinstance(e, FileNotFoundError) else 126)

while True:
    try:
        _, status = os.waitpid(pid, 0)
        break
    except InterruptedError:
        pass

me = os.getpid()
uid = os.getuid()


def sweep(doomed):
    """Kills, until none is left, the processes for which doomed(pid, sid)."""
    for _ in range(50):
        left = 0
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == me:
                continue
            try:
                with open("/proc/%s/stat" % p, "rb") as f:
                    st = f.read()
                if doomed(p, int(st[st.rindex(b")") + 2:].split()[3])):
                    os.kill(int(p), signal.SIGKILL)
                    left += 1
            except (OSError, ValueError):
                pass
        if not left:
            return


# What CMD left in its session.
sweep(lambda p, psid: psid == sid)

# Then what earlier commands left behind in sessions of their own (setsid, a
# double-forked daemon), which the sweep above cannot see: every process of
# this user whose session is not led by one of terp's own scripts (another
# command's run.py, kill.py, list.py, the egress bridge). A process that
# disguises itself as one of them survives until Pause or Close, within the
# container's limits.
MARKS = (b"# run.py starts every command", b"# kill.py delivers", b"# list.py prints",
         b"# terp's egress bridge")


def led_by_terp(leader):
    try:
        with open("/proc/%d/cmdline" % leader, "rb") as f:
            cmdline = f.read()
    except OSError:
        return False  # the leader is gone: a double-forked daemon's session
    return any(m in cmdline for m in MARKS)


sweep(lambda p, psid: psid not in (0, sid) and os.stat("/proc/" + p).st_uid == uid and not led_by_terp(psid))

if os.WIFSIGNALED(status):
    os._exit(128 + os.WTERMSIG(status))
os._exit(os.WEXITSTATUS(status))
