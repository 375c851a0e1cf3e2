package kernel

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// The code owns /work, terp's own directory in it included: it can replace
// /work/.terp with a file or a symlink, remove it, make it read-only, or put
// directories where terp's files go. Writing there would then fail ("mkdirat
// .terp: file exists") and every later step with it. The sandbox's WriteFile
// never follows a link out of /work, so a planted link makes the write fail
// rather than land on the host; the failure is then repaired and the write
// tried once more.

// repairTimeout bounds the repair command.
const repairTimeout = 30 * time.Second

// repairScript puts /work/.terp back as a directory the code's user can
// write, down to what is in it (matplotlib's cache), removing (never
// following) a file or symlink in its place, and removes what stands where
// the files named on its command line go. It runs inside the sandbox, as
// the code does, so it can do nothing the code could not.
var repairScript = `
import os, shutil, stat, sys
d = "` + path.Join(sandbox.WorkDir, InternalDir) + `"
try:
    st = os.lstat(d)
except FileNotFoundError:
    st = None
if st is not None and not stat.S_ISDIR(st.st_mode):
    os.unlink(d)
    st = None
if st is None:
    os.mkdir(d)
os.chmod(d, 0o755)
for top, dirs, files in os.walk(d):
    for name, bits in [(n, 0o700) for n in dirs] + [(n, 0o600) for n in files]:
        p = os.path.join(top, name)
        st = os.lstat(p)
        if not stat.S_ISLNK(st.st_mode):
            os.chmod(p, stat.S_IMODE(st.st_mode) | bits)
for name in sys.argv[1:]:
    p = os.path.join(d, name)
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p)
`

// writeInternal writes one of terp's files (the worker's source, the
// script) at p in InternalDir, repairing the directory if the code broke
// it. The usual write costs nothing more; the repair, a command in the
// sandbox, runs only after a failed write.
func writeInternal(ctx context.Context, sbx sandbox.Sandbox, p, content string) error {
	err := sbx.WriteFile(ctx, p, strings.NewReader(content))
	if err == nil || ctx.Err() != nil {
		return err
	}
	res, rerr := sbx.Exec(ctx, []string{"python3", "-c", repairScript, path.Base(p)},
		sandbox.ExecOptions{Dir: sandbox.WorkDir, Timeout: repairTimeout})
	if rerr == nil && res.ExitCode != 0 {
		rerr = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	if rerr != nil {
		return fmt.Errorf("%w (repairing /work/%s failed: %v)", err, InternalDir, rerr)
	}
	return sbx.WriteFile(ctx, p, strings.NewReader(content))
}
