package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
)

// matplotlib builds a font cache (fontlist-vNNN.json) the first time it is
// imported with an empty config directory, which in a new sandbox is every
// time: opening each font on the system costs 0.3 to 0.5 s of the first
// chart, a good part of a short analysis. Every sandbox of this backend
// sees the same fonts (the host's /usr), so the cache one builds is right
// for all of them. The backend builds it once, when it first checks the
// sandbox (Create waits for it, once per boot, as the first chart would
// have), in a sandbox of its own that runs no code but matplotlib's: it
// never takes a cache that a sandbox's code could have written. It keeps it
// in the root, keyed by what it rests on (the probe's key and the font
// directories), and shows it to every command read-only under fontSeedDir,
// at the path FontSeedEnv names. The kernel's worker copies it into its
// config directory before matplotlib is imported (seed_font_cache in
// internal/kernel/worker.py). matplotlib rebuilds by itself a cache whose
// fonts are gone; fonts added are seen once the key changes.

// FontSeedEnv names, in a command's environment, the read-only copy of the
// font cache, when there is one.
const FontSeedEnv = "TERP_FONTLIST"

// fontSeedDir is where the copy is shown in the sandbox, beside the other
// files of /etc that terp gives the sandbox.
const fontSeedDir = "/etc/terp"

// fontRoots are the directories whose fonts matplotlib lists (besides its
// own, which the probe's key covers).
var fontRoots = []string{"/usr/share/fonts", "/usr/local/share/fonts"}

// fontSeedBuild runs in the build sandbox: it makes matplotlib build its
// cache in /work/mpl and prints the file's name.
const fontSeedBuild = "import glob, os\n" +
	"os.environ['MPLCONFIGDIR'] = '/work/mpl'\n" +
	"import matplotlib.font_manager\n" +
	"print(os.path.basename(glob.glob('/work/mpl/fontlist-v*.json')[0]))\n"

// fontSeedRetry is how long a failed build is not tried again.
const fontSeedRetry = time.Hour

// maxFontSeed bounds the cache terp keeps (a system with every Debian font
// package has a few MB).
const maxFontSeed = 16 << 20

func (b *Backend) fontSeedRoot() string { return filepath.Join(b.cfg.Root, ".fontlist") }

// fontKey is the fingerprint of what the cache rests on: the probe's key
// (Python, the libraries' directories, the boot) and every directory under
// fontRoots; "" when it cannot be told.
func (b *Backend) fontKey() string {
	probe := b.recordedProbeKey()
	if probe == "" {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(probe))
	for _, root := range fontRoots {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if fi, err := d.Info(); err == nil {
				fmt.Fprintf(h, "%s\x00%d\x00", p, fi.ModTime().UnixNano())
			}
			return nil
		})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// findFontSeed returns the host path of the cache built for key, or "".
func (b *Backend) findFontSeed(key string) string {
	matches, _ := filepath.Glob(filepath.Join(b.fontSeedRoot(), key, "fontlist-v*.json"))
	if len(matches) != 1 {
		return ""
	}
	return matches[0]
}

// loadFontSeed finds the font cache once the probe has passed, building it
// first if there is none. A failure only costs what it did before: each
// sandbox builds its own.
func (b *Backend) loadFontSeed(ctx context.Context) {
	if !slices.Contains(pythonPackages, "matplotlib") {
		return
	}
	key := b.fontKey()
	if key == "" {
		return
	}
	p := b.findFontSeed(key)
	if p == "" {
		// A build that failed is not tried again by every process: each
		// would pay for it before its first sandbox.
		failed := filepath.Join(b.fontSeedRoot(), key+".failed")
		if fi, err := os.Stat(failed); err == nil && time.Since(fi.ModTime()) < fontSeedRetry {
			return
		}
		b.sweepScratch(".fontlist-")
		var err error
		if p, err = b.buildFontSeed(ctx, key); err != nil {
			if merr := os.Mkdir(b.fontSeedRoot(), 0o755); merr == nil || os.IsExist(merr) {
				_ = os.WriteFile(failed, []byte(err.Error()+"\n"), 0o644)
			}
			return
		}
		_ = os.Remove(failed)
	}
	b.fontSeed.Store(&p)
}

// sweepScratch removes the scratch directories named prefix that a terp
// which exited in the middle of its build left (an hour old: a build takes
// seconds).
func (b *Backend) sweepScratch(prefix string) {
	old, _ := filepath.Glob(filepath.Join(b.cfg.Root, prefix+"*"))
	for _, dir := range old {
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() && time.Since(fi.ModTime()) > time.Hour {
			_ = removeTree(dir)
		}
	}
}

// buildFontSeed builds the cache in a throwaway sandbox and keeps it under
// key, removing those of other keys built more than probeMaxAge ago.
func (b *Backend) buildFontSeed(ctx context.Context, key string) (string, error) {
	s, done, err := b.scratch(".fontlist-")
	if err != nil {
		return "", err
	}
	defer done()
	res, err := s.Exec(ctx, []string{"python3", "-c", fontSeedBuild}, sandbox.ExecOptions{Timeout: 30 * time.Second})
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(res.Stdout)
	if res.ExitCode != 0 || !strings.HasPrefix(name, "fontlist-v") || path.Base(name) != name {
		return "", fmt.Errorf("font cache: exit %d: %s", res.ExitCode, res.Stderr)
	}
	data, err := os.ReadFile(filepath.Join(s.work, "mpl", name))
	if err != nil {
		return "", err
	}
	var probe struct {
		Version any `json:"_version"`
	}
	if len(data) > maxFontSeed || json.Unmarshal(data, &probe) != nil || probe.Version == nil {
		return "", fmt.Errorf("font cache: %s is not matplotlib's", name)
	}
	root := b.fontSeedRoot()
	if err := os.Mkdir(root, 0o755); err != nil && !os.IsExist(err) {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, ".new-")
	if err != nil {
		return "", err
	}
	// The sandboxes' uids (when terp is root) read it through the bind.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
		_ = os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(root, key)); err != nil {
		// Another process was first: keep its copy.
		_ = os.RemoveAll(tmp)
	}
	// Caches of other keys go once nothing can be using them: another
	// terp on this root (with other sandbox_uids, say) may have its own.
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && e.Name() != key && time.Since(fi.ModTime()) > probeMaxAge {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
	if p := b.findFontSeed(key); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("font cache: not kept")
}

// fontSeedArgs are the bwrap options that show the cache to a command. A
// cache removed meanwhile (by a terp with another key, a day later) is left
// out rather than failing the command; the worker then builds its own.
func (b *Backend) fontSeedArgs() []string {
	p := b.fontSeed.Load()
	if p == nil {
		return nil
	}
	in := path.Join(fontSeedDir, filepath.Base(*p))
	return []string{"--ro-bind-try", *p, in, "--setenv", FontSeedEnv, in}
}

// FontCache is the host path of matplotlib's font cache that commands see,
// or "" while there is none.
func (b *Backend) FontCache() string {
	if p := b.fontSeed.Load(); p != nil {
		return *p
	}
	return ""
}
