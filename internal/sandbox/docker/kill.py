# kill.py delivers a signal to the commands terp runs in a Docker sandbox:
#   python3 -I -S -c KILL_PY SIGNAL SESSION|all
# It signals every process of the session that run.py made (or of every such
# session, for "all"). The session's leader, run.py itself, is signalled only
# by SIGKILL: for other signals it waits for its child as a shell would. The
# container's own processes (session 1: docker-init and its keep-alive) and
# this script are never touched.
import os, sys

sig = int(sys.argv[1])
target = sys.argv[2]
me = os.getpid()
for _ in range(50 if sig == 9 else 1):
    hit = 0
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == me:
            continue
        pid = int(p)
        try:
            with open("/proc/%s/stat" % p, "rb") as f:
                st = f.read()
            sid = int(st[st.rindex(b")") + 2:].split()[3])
        except (OSError, ValueError):
            continue
        if sid in (0, 1, os.getsid(0)) or sid < 0:
            continue
        if target != "all" and sid != int(target):
            continue
        if pid == sid and sig != 9:
            continue
        try:
            os.kill(pid, sig)
            hit += 1
        except OSError:
            pass
    if not hit:
        break
