package memory

import (
	"context"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

// PythonStandIn is a Program to register as "python3", so that what terp
// runs as Python runs in a memory sandbox: run as package kernel's worker
// (`python3 /work/.terp/worker.py ...`, in either mode) it speaks the
// worker's protocol and runs each request's code (standInWorker).
// `python3 FILE` runs FILE, `python3 -c CODE` runs CODE, and plain
// `python3` its stdin; options before those are skipped.
//
// The code is not Python but a line language a test writes in its place,
// one statement a line:
//
//	print TEXT       TEXT and a newline on stdout
//	stderr TEXT      TEXT and a newline on stderr
//	write PATH TEXT  the file at PATH holds TEXT (no newline after it)
//	cat PATH         the file at PATH on stdout
//	sleep DURATION   waits DURATION (as time.ParseDuration reads it), or
//	                 until the command is stopped
//	exit N           ends the run with exit code N
//
// TEXT is the rest of the line, as it is. PATH is relative to the working
// directory (/work for the script runner). Blank lines and lines starting
// with # do nothing; code that ends without exit exits 0. As Python reads
// the whole file before it runs any of it, a line that is none of these
// runs nothing and exits 1 with a SyntaxError naming the file and line: real
// Python sent to the stand-in by mistake fails plainly, not half run.
func PythonStandIn(ctx context.Context, c *Cmd) int {
	name, code, err := pythonSource(c)
	if err != nil {
		fmt.Fprintf(c.Stderr, "%s: %v\n", c.Args[0], err)
		return 2
	}
	if name == workerScript {
		return standInWorker(ctx, c)
	}
	exit, _ := runStandIn(ctx, c, name, code)
	return exit
}

// exception is the exception that ended a run, as the worker's done frame
// reports it (kernel/protocol.go): its type's name, its value, and what
// stderr shows of it, as lines.
type exception struct {
	Name      string   `json:"name"`
	Value     string   `json:"value"`
	Traceback []string `json:"traceback"`
}

// raise prints e on stderr, as Python prints an exception that ends a
// program, and returns it.
func raise(c *Cmd, e *exception) *exception {
	fmt.Fprintln(c.Stderr, strings.Join(e.Traceback, "\n"))
	return e
}

// runStandIn runs code in the line language, as the file name, and returns
// its exit code and the exception that ended it, nil if none did.
func runStandIn(ctx context.Context, c *Cmd, name, code string) (int, *exception) {
	prog, err := parseStandIn(name, code)
	if err != nil {
		return 1, raise(c, err)
	}
	for _, st := range prog {
		if exit, e, done := st.run(ctx, c); done {
			return exit, e
		}
	}
	return 0, nil
}

// pythonSource finds the code a python3 command line runs, and its name in
// messages.
func pythonSource(c *Cmd) (name, code string, err error) {
	args := c.Args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-c" && args[0] != "-" {
		args = args[1:]
	}
	switch {
	case len(args) == 0 || args[0] == "-":
		data, err := io.ReadAll(c.Stdin)
		return "<stdin>", string(data), err
	case args[0] == "-c":
		if len(args) < 2 {
			return "", "", fmt.Errorf("argument expected for the -c option")
		}
		return "<string>", args[1], nil
	}
	name = args[0]
	if !path.IsAbs(name) {
		name = path.Join(c.Dir, name)
	}
	data, err := c.FS.ReadFile(name)
	if err != nil {
		return "", "", fmt.Errorf("can't open file %q: %v", name, err)
	}
	return name, string(data), nil
}

// statement is one line of stand-in code.
type statement struct {
	verb, arg string
	path      string // for write and cat
	wait      time.Duration
	exit      int
}

// parseStandIn reads all of code before any of it runs. A line it cannot
// read is a SyntaxError, as Python formats one.
func parseStandIn(name, code string) ([]statement, *exception) {
	var prog []statement
	for i, line := range strings.Split(code, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		verb, arg, _ := strings.Cut(line, " ")
		st := statement{verb: verb, arg: arg}
		var err error
		switch verb {
		case "print", "stderr":
		case "write":
			var ok bool
			if st.path, st.arg, ok = strings.Cut(arg, " "); !ok || st.path == "" {
				err = fmt.Errorf("write wants a path and a text")
			}
		case "cat":
			if st.path = arg; arg == "" {
				err = fmt.Errorf("cat wants a path")
			}
		case "sleep":
			st.wait, err = time.ParseDuration(arg)
		case "exit":
			st.exit, err = strconv.Atoi(arg)
		default:
			err = fmt.Errorf("the stand-in for Python runs print, stderr, write, cat, sleep and exit, not %q", verb)
		}
		if err != nil {
			return nil, &exception{
				Name:      "SyntaxError",
				Value:     fmt.Sprintf("%v (%s, line %d)", err, path.Base(name), i+1),
				Traceback: []string{fmt.Sprintf("  File %q, line %d", name, i+1), "    " + line, "SyntaxError: " + err.Error()},
			}
		}
		prog = append(prog, st)
	}
	return prog, nil
}

// run runs one statement; done says the program ends, with exit and the
// exception that ended it, if one did.
func (st statement) run(ctx context.Context, c *Cmd) (exit int, e *exception, done bool) {
	var err error
	switch st.verb {
	case "print":
		_, err = fmt.Fprintln(c.Stdout, st.arg)
	case "stderr":
		_, err = fmt.Fprintln(c.Stderr, st.arg)
	case "write":
		err = c.FS.WriteFile(st.path, []byte(st.arg))
	case "cat":
		var data []byte
		if data, err = c.FS.ReadFile(st.path); err == nil {
			_, err = c.Stdout.Write(data)
		}
	case "sleep":
		t := time.NewTimer(st.wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return 1, nil, true
		}
	case "exit":
		return st.exit, nil, true
	}
	if err != nil {
		value := fmt.Sprintf("%s: %v", st.verb, err)
		return 1, raise(c, &exception{Name: "OSError", Value: value,
			Traceback: []string{"Traceback (most recent call last):", "OSError: " + value}}), true
	}
	return 0, nil, false
}
