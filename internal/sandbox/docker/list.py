# list.py prints the regular files under a directory, one JSON object a line:
#   python3 -I -S -c LIST_PY DIR
# Symbolic links are not followed, so a link the code made to / lists nothing.
# It exits 3 when DIR does not exist and 4 when it is not a directory.
import json, os, stat, sys

root = sys.argv[1]
try:
    if not stat.S_ISDIR(os.lstat(root).st_mode):
        sys.exit(4)  # not a directory
except FileNotFoundError:
    sys.exit(3)
for d, dirs, files in os.walk(root):
    for name in files:
        p = os.path.join(d, name)
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        rel = os.path.relpath(p, root)
        print(json.dumps({"path": rel, "size": st.st_size, "mode": st.st_mode & 0o7777, "mtime": st.st_mtime_ns}))
