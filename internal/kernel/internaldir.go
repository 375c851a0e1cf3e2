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

// writeInternal writes one of terp's files (the worker's source) at p in
// InternalDir, repairing the directory if the code broke
// it. The usual write costs nothing more; the repair, a command in the
// sandbox, runs only after a failed write.
func writeInternal(ctx context.Context, sbx sandbox.Sandbox, p, content string) error {
	err := sbx.WriteFile(ctx, p, strings.NewReader(content))
	if err == nil || ctx.Err() != nil {
		return err
	}
	// The repair is the worker's repair_internal_dir, run from its source on
	// stdin, since the code may have left no place to write it.
	res, rerr := sbx.Exec(ctx, []string{"python3", "-", "--repair", path.Base(p)},
		sandbox.ExecOptions{Dir: sandbox.WorkDir, Timeout: repairTimeout, Stdin: strings.NewReader(workerSource)})
	if rerr == nil && res.ExitCode != 0 {
		rerr = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	if rerr != nil {
		return fmt.Errorf("%w (repairing /work/%s failed: %v)", err, InternalDir, rerr)
	}
	return sbx.WriteFile(ctx, p, strings.NewReader(content))
}
