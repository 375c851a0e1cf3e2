package kernel

import (
	"path"

	"github.com/terpdev/terp/internal/egress"
	"github.com/terpdev/terp/internal/sandbox"
)

// InternalDir is terp's own directory in /work, relative to it: the worker's
// source (worker.py, and its notebook layer, notebook.py, with its compiled
// code), in script mode the code of the run in progress (main.py), and the
// packages %pip installs (python/) live there. It is never listed to the
// model nor downloaded.
const InternalDir = ".terp"

// pythonEnv is environment every Python terp starts in a sandbox gets.
// matplotlib's font cache lives in /work/.terp rather than the default
// /tmp, which a backend may give each command afresh: building the cache
// costs a second or more, and it should be paid once per sandbox. Python's
// user site is the conversation's package directory, where %pip installs
// (as pip does in the allowlist mode), so that the worker and every Python
// the code starts can import what was installed.
var pythonEnv = []string{
	"MPLCONFIGDIR=" + path.Join(sandbox.WorkDir, InternalDir, "matplotlib"),
	"PYTHONUSERBASE=" + egress.UserBase,
}
