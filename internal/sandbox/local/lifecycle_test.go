package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terpdev/terp/internal/sandbox"
	"github.com/terpdev/terp/internal/terptest"
)

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{Limits: sandbox.Limits{Processes: 100}})
	writeFile(t, s, "uploaded.csv", "x\n1\n")
	runPython(t, s, "main.py", "open('/work/made.txt', 'w').write('by the code')", sandbox.ExecOptions{})

	// A long-running process (the kernel, say) is stopped by Pause.
	mark := marker(t)
	writeFile(t, s, "sleep.sh", "exec -a "+mark+" sleep 1000\n")
	p, err := s.Start(t.Context(), []string{"bash", "sleep.sh"}, sandbox.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}

	id, err := s.Pause(t.Context())
	if err != nil || id != s.ID() {
		t.Fatalf("Pause = %q, %v", id, err)
	}
	if _, err := p.Wait(); err == nil {
		t.Error("Wait after Pause reported no error")
	}
	waitNoProcesses(t, mark)
	if _, err := s.Exec(t.Context(), []string{"true"}, sandbox.ExecOptions{}); err == nil {
		t.Error("Exec on a paused sandbox succeeded")
	}

	// A later terp process: a new Backend over the same root.
	b, err := New(Config{Root: testBackend.Root()})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Resume(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	r := sb.(*Sandbox)
	t.Cleanup(func() { r.Close(t.Context()) })
	if r.meta.Limits.Processes != 100 {
		t.Errorf("resumed with limits %+v, want the original ones", r.meta.Limits)
	}
	res := runPython(t, r, "check.py", "print(open('uploaded.csv').read() + open('made.txt').read())", sandbox.ExecOptions{})
	if res.Stdout != "x\n1\nby the code\n" {
		t.Errorf("after Resume: stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	t.Parallel()
	sb, err := testBackend.Create(t.Context(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := sb.(*Sandbox)
	// The code makes its files hard to remove.
	code := `
import os
os.makedirs("/work/locked/inner")
open("/work/locked/inner/f.txt", "w").write("x")
os.chmod("/work/locked/inner/f.txt", 0)
os.chmod("/work/locked/inner", 0)
os.chmod("/work/locked", 0o500)
os.chmod("/work", 0o500)
`
	if res := runPython(t, s, "main.py", code, sandbox.ExecOptions{}); res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	mark := marker(t)
	// terp's own upload must still work (for a non-root terp, too).
	if err := os.Chmod(s.HostDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, s, "sleep.sh", "exec -a "+mark+" sleep 1000\n")
	if _, err := s.Start(t.Context(), []string{"bash", "sleep.sh"}, sandbox.ExecOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Close: %v", s.dir, err)
	}
	waitNoProcesses(t, mark)
	if _, err := s.Exec(t.Context(), []string{"true"}, sandbox.ExecOptions{}); err == nil {
		t.Error("Exec on a closed sandbox succeeded")
	}
	if _, err := testBackend.Resume(t.Context(), s.ID()); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Resume of a closed sandbox = %v, want ErrExpired", err)
	}
}

func TestResumeUnknown(t *testing.T) {
	t.Parallel()
	for _, id := range []sandbox.SessionID{"000000000000", "../../etc", "", "ABCDEF012345"} {
		if _, err := testBackend.Resume(t.Context(), id); !errors.Is(err, sandbox.ErrExpired) {
			t.Errorf("Resume(%q) = %v, want ErrExpired", id, err)
		}
	}
}

func TestSandboxExpires(t *testing.T) {
	t.Parallel()
	s := newSandbox(t, sandbox.Options{Timeout: 500 * time.Millisecond})
	if res := runPython(t, s, "main.py", "print('in time')", sandbox.ExecOptions{}); res.Stdout != "in time\n" {
		t.Fatalf("stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
	time.Sleep(600 * time.Millisecond)
	if _, err := s.Exec(t.Context(), []string{"python3", "main.py"}, sandbox.ExecOptions{}); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Exec after the lifetime = %v, want ErrExpired", err)
	}
	if _, err := s.Start(t.Context(), []string{"python3", "main.py"}, sandbox.ExecOptions{}); !errors.Is(err, sandbox.ErrExpired) {
		t.Errorf("Start after the lifetime = %v, want ErrExpired", err)
	}
	// Files stay readable: the agent may still collect what the code saved.
	if got := readFile(t, s, "main.py"); got != "print('in time')" {
		t.Errorf("main.py = %q", got)
	}
}

func TestSandboxesAreSeparate(t *testing.T) {
	t.Parallel()
	a := newSandbox(t, sandbox.Options{})
	b := newSandbox(t, sandbox.Options{})
	writeFile(t, a, "only-a.txt", "a")
	res := runPython(t, b, "main.py", "import os\nprint(os.listdir('/work'))", sandbox.ExecOptions{})
	if strings.Contains(res.Stdout, "only-a") {
		t.Errorf("sandbox b sees a's files: %s", res.Stdout)
	}
	if a.ID() == b.ID() || filepath.Dir(a.dir) != filepath.Dir(b.dir) {
		t.Errorf("ids %s and %s", a.ID(), b.ID())
	}
}

func TestNewExplainsWhatIsMissing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{
			name: "no bubblewrap",
			cfg:  Config{BwrapPath: "/nonexistent/bwrap"},
			want: []string{"bubblewrap is not installed", "apt-get install bubblewrap", "dnf install bubblewrap"},
		},
		{
			name: "no python",
			cfg:  Config{Python: "/usr/bin/no-such-python3"},
			want: []string{"python3 is not installed", "python3-numpy python3-pandas python3-matplotlib"},
		},
	}
	home := terptest.TempDir(t)
	pyenv := filepath.Join(home, "python3")
	if err := os.Symlink("/usr/bin/python3", pyenv); err != nil {
		t.Fatal(err)
	}
	tests = append(tests, struct {
		name string
		cfg  Config
		want []string
	}{name: "python in a home directory", cfg: Config{Python: pyenv}, want: []string{"outside /usr"}})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Root = terptest.TempDir(t)
			_, err := New(tt.cfg)
			var setup *SetupError
			if !errors.As(err, &setup) {
				t.Fatalf("New = %v, want a *SetupError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestCheckExplainsBrokenNamespaces uses a stand-in for bwrap that fails the
// way bwrap does where it cannot make namespaces (AppArmor's restriction, a
// kernel without unprivileged user namespaces, a container), since a real
// machine cannot be put in those states for a test. Each message is bwrap's
// own text; the first failed sandbox must say what it is and what to do.
func TestCheckExplainsBrokenNamespaces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		bwrapSays string
		want      []string
	}{
		{"bwrap: setting up uid map: Permission denied",
			[]string{"AppArmor", "kernel.apparmor_restrict_unprivileged_userns=0", "bwrap-userns-restrict", "--sandbox docker"}},
		{"bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted",
			[]string{"AppArmor", "apparmor_restrict_unprivileged_userns"}},
		{"bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces. " +
			"On e.g. debian this can be enabled with 'sysctl kernel.unprivileged_userns_clone=1'.",
			[]string{"does not allow unprivileged user namespaces", "unprivileged_userns_clone=1", "--sandbox docker"}},
		{"bwrap: Creating new namespace failed: No space left on device",
			[]string{"user.max_user_namespaces"}},
		{"bwrap: Creating new namespace failed: Operation not permitted",
			[]string{"inside a container", "seccomp=unconfined", "--sandbox cpuos"}},
		{"bwrap: Can't mount proc on /newroot/proc: Operation not permitted",
			[]string{"cannot mount /proc", "systempaths=unconfined"}},
		{"bwrap: Unexpected capabilities but not setuid, old file caps config?",
			[]string{"file capabilities", "setcap -r"}},
		{"bwrap: a failure nobody has seen yet",
			[]string{"a failure nobody has seen yet", "--sandbox docker"}},
	}
	for i, tt := range tests {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			dir := terptest.TempDir(t)
			fake := filepath.Join(dir, "bwrap")
			script := "#!/bin/sh\n" +
				"case \"$1\" in --help) echo 'usage: bwrap'; exit 0;; esac\n" +
				"echo \"" + tt.bwrapSays + "\" >&2\n" +
				"exit 1\n"
			if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := New(Config{Root: filepath.Join(dir, "root"), BwrapPath: fake})
			if err != nil {
				t.Fatal(err)
			}
			_, err = b.Create(t.Context(), sandbox.Options{})
			var setup *SetupError
			if !errors.As(err, &setup) {
				t.Fatalf("Create = %v, want a *SetupError", err)
			}
			for _, w := range append(tt.want, tt.bwrapSays) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCheckExplainsMissingLibraries(t *testing.T) {
	// Not parallel: it changes the package list the probe looks for.
	saved := pythonPackages
	pythonPackages = append(slices.Clone(saved), "terp_no_such_module")
	defer func() { pythonPackages = saved }()

	b, err := New(Config{Root: terptest.TempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Check(t.Context())
	var setup *SetupError
	if !errors.As(err, &setup) {
		t.Fatalf("Check = %v, want a *SetupError", err)
	}
	for _, w := range []string{"lacks terp_no_such_module", "python3-numpy"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if strings.Contains(setup.Problem, "numpy") {
		t.Errorf("error blames numpy, which is installed: %q", setup.Problem)
	}
}

// TestRestorePermissions covers what Close does for a non-root terp (as root
// the permissions never stop RemoveAll): directories the code locked are
// opened again, and a symlink to a host directory is not followed.
func TestRestorePermissions(t *testing.T) {
	t.Parallel()
	dir := terptest.TempDir(t)
	host := terptest.TempDir(t)
	if err := os.Chmod(host, 0o711); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(dir, "work", "locked", "inner")
	if err := os.MkdirAll(locked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(dir, "work", "locked", "hostlink")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{locked, filepath.Dir(locked), filepath.Join(dir, "work")} {
		if err := os.Chmod(d, 0); err != nil {
			t.Fatal(err)
		}
	}
	restorePermissions(dir)
	for _, d := range []string{filepath.Join(dir, "work"), filepath.Dir(locked), locked} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want mode 0700", d, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(host); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("the symlinked host directory changed: %v, %v", fi.Mode(), err)
	}
	if err := removeTree(dir); err != nil {
		t.Fatal(err)
	}
}

// TestExpiredWhileRunning covers a sandbox whose terp was killed before it
// could pause: after its lifetime it is cleaned up, by Resume or by Prune,
// while a paused sandbox is kept however old.
func TestExpiredWhileRunning(t *testing.T) {
	// A backend of its own: Prune looks at every sandbox under the root.
	b, err := New(Config{Root: terptest.TempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	opt := sandbox.Options{Timeout: 200 * time.Millisecond}

	running, err := b.Create(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	paused, err := b.Create(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	pausedID, err := paused.Pause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.Create(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)

	// Resume of the one left running cleans it up.
	runningID := running.ID()
	if _, err := b.Resume(ctx, runningID); !errors.Is(err, sandbox.ErrExpired) {
		t.Fatalf("Resume of an expired sandbox: %v, want ErrExpired", err)
	}
	if _, err := os.Stat(filepath.Join(b.Root(), string(runningID))); !os.IsNotExist(err) {
		t.Errorf("the expired sandbox's directory is still there: %v", err)
	}
	// Prune removes the other one left running, and keeps the paused one.
	removed, err := b.Prune(ctx)
	otherID := other.ID()
	if err != nil || len(removed) != 1 || removed[0] != otherID {
		t.Fatalf("Prune = %v, %v; want only %s", removed, err, otherID)
	}
	resumed, err := b.Resume(ctx, pausedID)
	if err != nil {
		t.Fatalf("Resume of the paused sandbox: %v", err)
	}
	if err := resumed.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
