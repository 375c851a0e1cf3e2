package conformance

// Commands says how a backend runs each of the commands the contract checks
// use: the command line for the command called name with args. Shell is
// for backends with a shell; Programs for a backend that is handed programs
// by name instead (package memory's).
type Commands func(name string, args ...string) []string

// Shell runs a command as its sh -c script, with the arguments as $1, $2...
func Shell(name string, args ...string) []string {
	script, ok := scripts[name]
	if !ok {
		panic("conformance: no command " + name)
	}
	return append([]string{"sh", "-c", script, name}, args...)
}

// Programs runs a command as the program called name, with args after it.
// The backend must provide a program for every name in scripts, doing what
// its comment says.
func Programs(name string, args ...string) []string {
	if _, ok := scripts[name]; !ok {
		panic("conformance: no command " + name)
	}
	return append([]string{name}, args...)
}

// scripts are the contract checks' commands. Each comment says what the
// command does, for a backend that writes it as a program; the script is
// the same thing in sh, which the backends that have one run.
var scripts = map[string]string{
	// Prints "out" on stdout and "err" on stderr, and exits 3.
	"echo-exit": `echo out; echo err >&2; exit 3`,
	// Copies stdin to stdout, then prints $FOO and a newline.
	"cat-env": `cat; echo "$FOO"`,
	// Prints its environment, one KEY=VALUE a line.
	"env": `env`,
	// Prints its working directory and a newline.
	"pwd": `pwd`,
	// cat PATH prints the file at PATH.
	"cat": `cat "$1"`,
	// copy SRC DST copies the file at SRC to DST.
	"copy": `cat "$1" > "$2"`,
	// write PATH TEXT writes TEXT, without a newline, to PATH, making its
	// missing parent directories.
	"write": `mkdir -p "$(dirname "$1")" && printf '%s' "$2" > "$1"`,
	// mkdir PATH makes the directory PATH and its parents.
	"mkdir": `mkdir -p "$1"`,
	// size PATH prints the size in bytes of the file at PATH.
	"size": `wc -c < "$1"`,
	// flood N M prints N "x", a newline and "END\n" on stdout, and M "y", a
	// newline and "END\n" on stderr.
	"flood": `head -c "$1" /dev/zero | tr '\0' x; echo; echo END; { head -c "$2" /dev/zero | tr '\0' y; echo; echo END; } >&2`,
	// tick PATH prints "started\n", then writes 1, 2, 3... to PATH, each
	// replacing the last, and never stops by itself.
	"tick": `echo started; i=0; while :; do i=$((i+1)); echo $i > "$1"; done`,
	// hang prints "started\n" and waits until it is killed.
	"hang": `echo started; sleep 600`,
	// echo-lines prints "got LINE\n" for each line of stdin; at its end it
	// prints "done\n" on stderr and exits 4.
	"echo-lines": `while read -r l; do echo "got $l"; done; echo done >&2; exit 4`,
}
