package local

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A passing probe is remembered in the sandboxes' root, so that each terp
// process does not pay for a throwaway sandbox (about 45 ms, a third of a
// one-step `terp ask`) before its first real one. The record is keyed by
// what the probe's verdict rests on: the probe itself, the bwrap and Python
// binaries, the directories the analysis libraries were found in (apt
// changes them when it installs or removes a package), whether terp runs as
// root, and the boot (sysctls such as unprivileged user namespaces are set
// at boot). It is trusted for probeMaxAge at most. `terp doctor` always
// probes (Check), and a failing probe removes the record.

// probeMaxAge bounds how long a passing probe is trusted.
const probeMaxAge = 24 * time.Hour

// probeRecord is the file's content.
type probeRecord struct {
	Key    string    `json:"key"`
	Dirs   []string  `json:"dirs"` // where the libraries were found, part of the key
	Passed time.Time `json:"passed"`
}

func (b *Backend) probeRecordPath() string { return filepath.Join(b.cfg.Root, ".probe-passed") }

// probeKey is the fingerprint of what a probe that found the libraries in
// dirs depends on; "" if any part cannot be read, which forces a probe.
func (b *Backend) probeKey(dirs []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%v\x00%v\x00", libraryProbe, strings.Join(pythonPackages, ","), runsAsRoot(), b.cfg.HostUIDs)
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	h.Write(boot)
	for _, p := range append([]string{b.cfg.BwrapPath, b.cfg.Python}, dirs...) {
		fi, err := os.Stat(p)
		if err != nil {
			return ""
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", p, fi.Size(), fi.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// probePassedBefore reports whether a probe passed recently with the same
// key as now.
func (b *Backend) probePassedBefore() bool { return b.recordedProbeKey() != "" }

// recordedProbeKey is the key of the recorded probe if it passed recently
// with the same key as now, else "".
func (b *Backend) recordedProbeKey() string {
	data, err := os.ReadFile(b.probeRecordPath())
	if err != nil {
		return ""
	}
	var r probeRecord
	if json.Unmarshal(data, &r) != nil || r.Key == "" {
		return ""
	}
	if age := time.Since(r.Passed); age < 0 || age >= probeMaxAge || r.Key != b.probeKey(r.Dirs) {
		return ""
	}
	return r.Key
}

// recordProbe remembers a passing probe that found the libraries in dirs,
// or forgets the last one (passed false). Failing to write is harmless:
// the next process probes again.
func (b *Backend) recordProbe(passed bool, dirs []string) {
	p := b.probeRecordPath()
	if !passed {
		_ = os.Remove(p)
		return
	}
	key := b.probeKey(dirs)
	if key == "" {
		return
	}
	data, err := json.Marshal(probeRecord{Key: key, Dirs: dirs, Passed: time.Now()})
	if err != nil {
		return
	}
	tmp := p + ".tmp"
	if os.WriteFile(tmp, data, 0o600) == nil {
		_ = os.Rename(tmp, p)
	}
}
