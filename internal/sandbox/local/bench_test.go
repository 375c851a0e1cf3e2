package local

import (
	"os/exec"
	"testing"

	"github.com/terpdev/terp/internal/sandbox"
)

// The three benchmarks below run the same `python3 -c 'print(1)'`: through
// Exec, through the bwrap command line Exec builds but started by hand with
// os/exec (so without the limits handshake), and with no sandbox at all.
// Exec minus BwrapByHand is terp's overhead; BwrapByHand minus PythonDirect
// is bubblewrap's.

var print1 = []string{"python3", "-c", "print(1)"}

func BenchmarkExecPrint1(b *testing.B) {
	s := newSandbox(b, sandbox.Options{})
	for b.Loop() {
		res, err := s.Exec(b.Context(), print1, sandbox.ExecOptions{})
		if err != nil || res.Stdout != "1\n" {
			b.Fatalf("Exec = %+v, %v", res, err)
		}
	}
}

func BenchmarkBwrapByHand(b *testing.B) {
	s := newSandbox(b, sandbox.Options{})
	argv, err := s.Argv(print1, sandbox.ExecOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{}
		out, err := cmd.Output()
		if err != nil || string(out) != "1\n" {
			b.Fatalf("bwrap = %q, %v", out, err)
		}
	}
}

func BenchmarkPythonDirect(b *testing.B) {
	for b.Loop() {
		cmd := exec.Command(DefaultPython, print1[1:]...)
		cmd.Env = []string{}
		out, err := cmd.Output()
		if err != nil || string(out) != "1\n" {
			b.Fatalf("python3 = %q, %v", out, err)
		}
	}
}
