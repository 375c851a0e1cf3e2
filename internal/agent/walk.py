# walk.py prints every regular file under a directory, one line each:
#   python3 -I -S -c WALK_PY DIR
# as "PATH_IN_HEX SIZE MODE MTIME_NS", PATH relative to DIR. The agent runs it
# when Sandbox.List may have stopped early (see listing.go). Symbolic links
# are neither listed nor followed; directories it cannot read are skipped.
import os, stat, sys

root = sys.argv[1]
out = sys.stdout
for d, dirs, files in os.walk(root):
    dirs.sort()
    for name in sorted(files):
        p = os.path.join(d, name)
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        rel = os.fsencode(os.path.relpath(p, root)).hex()
        out.write("%s %d %d %d\n" % (rel, st.st_size, st.st_mode & 0o777, st.st_mtime_ns))
