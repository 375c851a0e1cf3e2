r"""terp's notebook layer: IPython's syntax, magics and display() for the worker.

The models terp serves learned to code in a Jupyter notebook: their cells
say `!ls`, `%pip install x`, `%%time` and `display(df)`. This module makes
such cells run in terp's worker (worker.py), in kernel mode and in script
mode alike, as they would in Jupyter, without IPython (the sandbox may not
have it) and without slowing a cell that uses none of it.

Compile first, load lazily. terp writes this file next to worker.py, which
reads its source when it starts and runs it as the module _terp_notebook
only when a run first needs it (worker.py's Notebook):

  - a cell that does not compile. IPython's syntax is never valid Python,
    so plain code compiles as it always did and never gets here; a cell
    that raised a SyntaxError is transformed (transform_cell) and compiled
    again. In script mode that happens in the worker, before the fork: the
    transform is pure, and it is all the worker ever runs of this module;
  - display() and get_ipython(), builtins in every cell and script. What
    get_ipython() returns is a stand-in (worker.py's TerpShell) that loads
    the Shell below at the first use of an attribute;
  - a cell's trailing value (kernel mode) of a type other than the plain
    builtin ones, shown by the same formatter as display();
  - an import of IPython (the real one is patched as it is imported, so
    that its display and get_ipython are terp's; without one, terp's
    stand-in, see SHIMS) or of ace_tools / caas_jupyter_tools.

The transform is line-based and keeps every line one line, so tracebacks and
SyntaxErrors carry the cell's own line numbers. It follows IPython's
inputtransformer2 and generates the same calls: at the start of a logical
line (not inside a string, brackets or a backslash continuation), `!cmd` is
get_ipython().system('cmd'), `!!cmd` and `x = !cmd` getoutput, `%name
args` and `x = %name args` run_line_magic, `obj?`, `?obj` pinfo and `obj??`,
`??obj` pinfo2, and a line that is not valid Python by itself and starts
with a magic's name and a space is that magic (automagic: `pip install x`).
`%%name args` on the first non-blank line makes the cell
get_ipython().run_cell_magic('name', 'args', body), whose body runs with
its own line numbers.

Supported magics (see %lsmagic): line magics %pip %conda %matplotlib
%config %time %timeit %cd %pwd %env %set_env %who %who_ls %whos %ls %ll
%cat %cp %mv %rm %mkdir %rmdir %run %load_ext %reload_ext %unload_ext
%autoreload %aimport %xmode %precision %reset %lsmagic %sx %system %pinfo
%pinfo2 %psearch; cell magics %%time %%timeit %%capture %%writefile
%%file %%bash %%sh %%script %%python %%python3 %%perl %%ruby %%html
%%HTML %%markdown %%latex %%svg %%SVG. An unknown magic raises UsageError,
which the worker prints as IPython does, without a traceback, and which
ends the cell.

display() shows an object as text in the output, where the model reads
it: a Figure or an image is saved as /work/figure_N.png (or .jpg) and one
line names the file; Markdown and LaTeX are their source, a DataFrame or
anything else with a repr of its own is that repr, HTML its source.

Nothing here runs in the worker's process at start, nor keeps state in a
fresh-mode worker between runs: the Shell is made on first use, in the run
(a forked child in script mode) that uses it.
"""

import builtins
import importlib
import importlib.machinery
import io
import linecache
import os
import re
import sys
import threading
import time
import types

# The worker has imported all of these. Others (subprocess, shlex, ast)
# are imported where they are used: a script that only calls display()
# loads this module in every run.

# Set by attach: what the worker gives this module (worker.py's
# Notebook.load lists it).
terp = None

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
SOURCE_LIMIT = 20000  # characters of source %pinfo2 shows
NETWORK_WAIT = 3.0  # seconds %pip waits to learn whether the index resolves
PIP_NOTE = "Note: you may need to restart the kernel to use updated packages."


def attach(api):
    global terp
    terp = api


class UsageError(Exception):
    """A magic misused: the worker prints it as IPython does, as
    `UsageError: <message>` without a traceback, and it ends the cell."""

    terp_usage = True


# --- the transform -------------------------------------------------------------


def recompile(compile_code, code, error):
    """Returns compile_code of code with its IPython syntax made Python, or
    raises error, code's own SyntaxError, when it has none. A cell the
    transform changed that still does not compile raises the transformed
    cell's SyntaxError: it has the same line numbers."""
    try:
        python = transform_cell(code)
    except Exception as e:  # noqa: BLE001 - a bug here must not hide the code's error
        terp.worker.log("transforming a cell: %s: %s" % (type(e).__name__, e))
        python = None
    # Without the frames of the compile (ast.parse's): a SyntaxError says
    # where it is itself.
    if python is None:
        raise error.with_traceback(None)
    try:
        return compile_code(python)
    except SyntaxError as e:
        raise e.with_traceback(None)


def compile_source(compile_code, code):
    """compile_code(code), with the transform when code does not compile."""
    try:
        return compile_code(code)
    except SyntaxError as e:
        error = e
    return recompile(compile_code, code, error)


ESCAPE = re.compile(r"([ \t]*)(!|%|\?)")
HELP_END = re.compile(r"([ \t]*)(%{0,2}(?!\d)[\w*]+(?:\.(?!\d)[\w*]+)*)(\?\??)[ \t]*$")
AUTOMAGIC = re.compile(r"([ \t]*)([A-Za-z_]\w*) +(.*)$")


def transform_cell(code):
    """Returns code with its IPython syntax made Python, every line staying
    one line, or None when it has none."""
    lines = code.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return None
    if lines[first].startswith("%%") and not HELP_END.match(lines[first].rstrip("\r\n")):
        # The call stands on the magic's line; run_cell_magic gives the body
        # the line numbers that follow it.
        name, _, args = lines[first][2:].rstrip().partition(" ")
        body = "".join(lines[first + 1:])
        if body and not body.endswith("\n"):
            body += "\n"
        return "".join(lines[:first]) + "get_ipython().run_cell_magic(%r, %r, %r)\n" % (name, args, body)
    out, changed, scan, i = [], False, Scan(), 0
    while i < len(lines):
        if scan.at_start():
            new = transform_line(lines, i)
            if new is not None:
                out.extend(new)
                i += len(new)
                changed = True
                continue
        scan.feed(lines[i])
        out.append(lines[i])
        i += 1
    return "".join(out) if changed else None


def transform_line(lines, i):
    """The Python for the logical line starting at lines[i] if it holds
    IPython syntax, as many lines as it spans (the first holds the call,
    the others are blank), else None."""
    text = lines[i].rstrip("\r\n")
    m = HELP_END.match(text)
    if m:
        return [m.group(1) + help_call(m.group(2), m.group(3)) + "\n"]
    m = ESCAPE.match(text)
    if m:
        end = continued_end(lines, i)
        return [m.group(1) + escape_call(assemble(lines, i, m.end(1), end)) + "\n"] + ["\n"] * (end - i)
    at = assign_escape(text)
    if at is not None:
        end = continued_end(lines, i)
        rhs = assemble(lines, i, at, end)
        if rhs.startswith("!"):
            call = "get_ipython().getoutput(%r)" % rhs[1:]
        else:
            name, _, args = rhs[1:].partition(" ")
            call = "get_ipython().run_line_magic(%r, %r)" % (name, args)
        return [text[:at] + call + "\n"] + ["\n"] * (end - i)
    m = AUTOMAGIC.match(text)
    if (m and m.group(2) in LINE_MAGICS and not m.group(3).startswith(("=", ","))
            and not valid_alone(text) and Scan().feed(text).at_start()):
        return [m.group(1) + "get_ipython().run_line_magic(%r, %r)\n" % (m.group(2), m.group(3).rstrip())]
    return None


def escape_call(line):
    """The call for a line that starts with an escape: !, !!, %, ? or ??."""
    if line.startswith("!!"):
        return "get_ipython().getoutput(%r)" % line[2:]
    if line.startswith("!"):
        return "get_ipython().system(%r)" % line[1:]
    if line.startswith("??"):
        return help_call(line[2:], "??") if line[2:].strip() else "get_ipython().show_usage()"
    if line.startswith("?"):
        return help_call(line[1:], "?") if line[1:].strip() else "get_ipython().show_usage()"
    name, _, args = line[1:].partition(" ")
    return "get_ipython().run_line_magic(%r, %r)" % (name, args)


def help_call(target, esc):
    method = "pinfo2" if esc == "??" else "psearch" if "*" in target else "pinfo"
    return "get_ipython().run_line_magic(%r, %r)" % (method, target.strip())


def continued_end(lines, i):
    """The last line of the line at i with its backslash continuations."""
    while i + 1 < len(lines) and lines[i].rstrip("\r\n").endswith("\\"):
        i += 1
    return i


def assemble(lines, i, col, end):
    """The line from lines[i][col:] to lines[end], its continuations joined
    with spaces as IPython joins them."""
    parts = [lines[i][col:]] + lines[i + 1:end + 1]
    return " ".join([p.rstrip()[:-1] for p in parts[:-1]] + [parts[-1].rstrip()])


def assign_escape(text):
    """Where `x = !cmd` or `x = %magic` has its ! or %: after the line's
    first `=` outside strings and brackets, as IPython looks for it."""
    scan = Scan()
    for i, c in scan.code(text):
        if c == "=" and scan.depth == 0:
            if i and text[i - 1] in "=<>!+-*/%&|^@:" or text[i + 1:i + 2] == "=":
                continue
            m = re.compile(r"[ \t]*(!|%(?=[A-Za-z_]))").match(text, i + 1)
            return m.start(1) if m and i else None
    return None


def valid_alone(text):
    try:
        compile(text.strip(), "<automagic>", "exec", dont_inherit=True)
        return True
    except SyntaxError:
        return False
    except Exception:  # noqa: BLE001 - null bytes: not a magic either
        return True


class Scan:
    """Where the physical lines fed so far leave Python's tokenizer: inside
    a string, inside brackets, or continued by a backslash. Only a line that
    starts outside all three can be an escape: a `%` that starts a line of a
    triple-quoted string or of a call's arguments is Python's."""

    __slots__ = ("quote", "depth", "continued")

    def __init__(self):
        self.quote = None  # the open string's delimiter
        self.depth = 0
        self.continued = False

    def at_start(self):
        return self.quote is None and self.depth == 0 and not self.continued

    def feed(self, line):
        for _ in self.code(line):
            pass
        return self

    def code(self, line):
        """Yields (index, char) of line's characters outside strings and
        comments, keeping count of strings, brackets and continuations."""
        self.continued = False
        i, n = 0, len(line)
        while i < n:
            if self.quote is not None:
                q = self.quote
                while i < n and not line.startswith(q, i):
                    i += 2 if line[i] == "\\" else 1
                if i >= n:
                    # A one-quote string ends with its line, unless a
                    # backslash continues it.
                    if len(q) == 1 and not escapes_newline(line):
                        self.quote = None
                    return
                i += len(q)
                self.quote = None
                continue
            c = line[i]
            if c == "#":
                return
            if c in "'\"":
                self.quote = c * 3 if line.startswith(c * 3, i) else c
                i += len(self.quote)
                continue
            if c == "\\" and not line[i + 1:].strip("\r\n"):
                self.continued = True
                return
            if c in "([{":
                self.depth += 1
            elif c in ")]}":
                self.depth = max(0, self.depth - 1)
            yield i, c
            i += 1


def escapes_newline(line):
    s = line.rstrip("\r\n")
    return (len(s) - len(s.rstrip("\\"))) % 2 == 1


# --- the shell -----------------------------------------------------------------

# The magics, by name: line magics are called with (shell, line, frame),
# frame being the caller's (for its locals), cell magics with (shell, line,
# cell, where), where says how to run the body (see Body).
LINE_MAGICS = {}
CELL_MAGICS = {}
VERBATIM = set()  # (kind, name) of the magics whose line is not var-expanded


def magic(kind, *names, expand=True):
    def register(fn):
        for name in names:
            (LINE_MAGICS if kind == "line" else CELL_MAGICS)[name] = fn
            if not expand:
                VERBATIM.add((kind, name))
        return fn
    return register


_shell = None


def shell():
    """The Shell, made at its first use, in the run that uses it."""
    global _shell
    if _shell is None:
        _shell = Shell()
    return _shell


def caller():
    """The frame of the code that called into terp."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in terp.files:
        f = f.f_back
    return f


class Events:
    """IPython's event hooks, which terp never fires: matplotlib registers
    its post_execute callback here when it finds a shell."""

    def __init__(self):
        self.callbacks = {}

    def register(self, event, function):
        self.callbacks.setdefault(event, []).append(function)

    def unregister(self, event, function):
        try:
            self.callbacks.get(event, []).remove(function)
        except ValueError:
            pass

    def trigger(self, event, *args, **kwargs):
        pass


class Shell:
    """What get_ipython() gives: the parts of IPython's InteractiveShell that
    notebook code calls, on the worker's namespace."""

    def __init__(self):
        self.events = Events()
        self.config = {}  # tqdm looks for IPKernelApp in it
        self.dir_history = [os.getcwd()]
        self.xmode = "Context"
        self.line_magics = dict(LINE_MAGICS)
        self.cell_magics = dict(CELL_MAGICS)

    def __repr__(self):
        return "<terp's IPython shell>"

    @property
    def user_ns(self):
        return terp.worker.ns

    @property
    def user_global_ns(self):
        return terp.worker.ns

    # --- running code ---------------------------------------------------------

    def ev(self, expr):
        """Evaluates expr in the user namespace and returns its value."""
        return eval(expr, self.user_ns)

    def ex(self, cmd):
        """Runs cmd in the user namespace."""
        exec(cmd, self.user_ns)

    def run_cell(self, raw_cell, store_history=False, silent=False, shell_futures=True, cell_id=None):
        """Runs raw_cell as a cell, IPython syntax and all, and returns an
        ExecutionResult; an exception is printed, as IPython does."""
        result = ExecutionResult()
        linecache.cache["<run_cell>"] = (len(raw_cell), None, raw_cell.splitlines(True), "<run_cell>")
        try:
            result.result = Body(raw_cell, "<run_cell>", 0).run(self.user_ns, show=not silent)
        except Exception as e:  # noqa: BLE001
            result.error_in_exec = e
            terp.print_exception(e)
        return result

    def run_line_magic(self, magic_name, line, _stack_depth=1):
        fn = self.line_magics.get(magic_name)
        if fn is None:
            extra = ""
            if magic_name in self.cell_magics:
                extra = " (But cell magic `%%%%%s` exists, did you mean that instead?)" % magic_name
            raise UsageError("Line magic function `%%%s` not found%s." % (magic_name, extra))
        frame = caller()
        if ("line", magic_name) not in VERBATIM:
            line = self.var_expand(line, frame)
        return fn(self, line, frame)

    def run_cell_magic(self, magic_name, line, cell):
        fn = self.cell_magics.get(magic_name)
        if fn is None:
            extra = ""
            if magic_name in self.line_magics:
                extra = " (But line magic `%%%s` exists, did you mean that instead?)" % magic_name
            raise UsageError("Cell magic `%%%%%s` not found%s." % (magic_name, extra))
        if cell == "":
            message = "%%%%%s is a cell magic, but the cell body is empty." % magic_name
            if magic_name in self.line_magics:
                message += " Did you mean the line magic %%%s (single %%)?" % magic_name
            raise UsageError(message)
        frame = caller()
        if ("cell", magic_name) not in VERBATIM:
            line = self.var_expand(line, frame)
        return fn(self, line, cell, Body.of_cell_magic(cell, frame, magic_name))

    def magic(self, arg_s):
        """IPython's old way to run a line magic: magic('name args')."""
        name, _, line = arg_s.lstrip("%").partition(" ")
        return self.run_line_magic(name, line)

    def find_line_magic(self, name):
        return self.line_magics.get(name)

    def find_cell_magic(self, name):
        return self.cell_magics.get(name)

    def find_magic(self, name, magic_kind="line"):
        return (self.line_magics if magic_kind == "line" else self.cell_magics).get(name)

    def register_magic_function(self, func, magic_kind="line", magic_name=None):
        """Registers func as a magic, as IPython.core.magic's decorators do."""
        name = magic_name or func.__name__
        if magic_kind in ("line", "line_cell"):
            self.line_magics[name] = lambda shell, line, frame: (
                func(line) if magic_kind == "line" else func(line, None))
        if magic_kind in ("cell", "line_cell"):
            self.cell_magics[name] = lambda shell, line, cell, where: func(line, cell)

    def show_usage(self):
        print(USAGE)

    def showtraceback(self, *args, **kwargs):
        e = sys.exc_info()[1]
        if e is not None:
            terp.print_exception(e)

    def enable_gui(self, gui=None):
        pass

    def set_next_input(self, text, replace=False):
        pass

    # --- the system shell ---------------------------------------------------------

    def var_expand(self, cmd, frame=None):
        """cmd with {expr}, $name and ${name} expanded in the caller's
        namespace (its locals, then the user namespace) as IPython does;
        $$ stands for $. If anything fails to expand, cmd as written: the
        braces of `awk '{print $1}'` are the shell's."""
        ns = dict(self.user_ns)
        if frame is not None and frame.f_locals is not self.user_ns:
            ns.update(frame.f_locals)
        try:
            return var_expand(cmd, ns)
        except Exception:  # noqa: BLE001
            return cmd

    def system(self, cmd):
        """Runs cmd with the system shell, its output in the cell's, and
        sets _exit_code; a failing command does not stop the cell."""
        cmd = self.var_expand(cmd, caller())
        pip = PIP_COMMAND.match(cmd)
        if pip:
            return pip_install(self, pip.group(1))
        shell_command(self, cmd)

    def getoutput(self, cmd, split=True, depth=0):
        """Returns what cmd prints, stdout and stderr merged, as an SList of
        its lines."""
        out = output_of(self.var_expand(cmd, caller()))
        return SList(out.splitlines()) if split else out

    def system_piped(self, cmd):
        return self.system(cmd)

    system_raw = system_piped


class ExecutionResult:
    def __init__(self):
        self.result = None
        self.error_before_exec = None
        self.error_in_exec = None

    @property
    def success(self):
        return self.error_before_exec is None and self.error_in_exec is None

    def raise_error(self):
        if self.error_in_exec is not None:
            raise self.error_in_exec


# $name, not inside single quotes, as IPython's DollarFormatter finds it.
DOLLAR = re.compile(r"(.*?)\$(\$?[\w.]+)(?=([^']*'[^']*')*[^']*$)", re.S)


def var_expand(cmd, ns):
    """IPython's var_expand: {expr} evaluated in ns, $name (not inside
    single quotes) and ${name} replaced, $$name left as $name. Raises when
    anything fails to evaluate."""
    import string

    formatter = string.Formatter()
    out = []
    for literal, field, spec, conversion in dollar_fields(formatter.parse(cmd)):
        out.append(literal)
        if field is not None:
            if spec:
                field = field + ":" + spec  # slices: {x[1:3]}
            out.append(format(formatter.convert_field(eval(field, ns), conversion), ""))
    return "".join(out)


def dollar_fields(parsed):
    """string.Formatter's fields of a command, with its $names as fields."""
    for literal, field, spec, conversion in parsed:
        pending, text = 0, ""
        for m in DOLLAR.finditer(literal):
            before, name = m.group(1, 2)
            if name.startswith("$"):
                text += before + name
            else:
                yield text + before, name, "", None
                text = ""
            pending = m.end()
        literal = text + literal[pending:]
        if field is not None and literal.endswith("$$"):
            # $${name}: the braces are the shell's.
            inner = field + ("!" + conversion if conversion else "") + (":" + spec if spec else "")
            yield literal[:-1] + "{" + inner + "}", None, None, None
            continue
        if field is not None and literal.endswith("$"):
            literal = literal[:-1]  # ${name} is $name
        yield literal, field, spec, conversion


class SList(list):
    """IPython's SList: what `x = !cmd` gives, a list of the output's lines
    with .s (joined with spaces), .n (with newlines), .l (the list) and
    .p (the lines that are paths)."""

    @property
    def l(self):  # noqa: E743
        return self

    list = l

    @property
    def s(self):
        return " ".join(self)

    spstr = s

    @property
    def n(self):
        return "\n".join(self)

    nlstr = n

    @property
    def p(self):
        from pathlib import Path

        return [Path(p) for p in self if os.path.exists(p)]

    paths = p

    def grep(self, pattern, prune=False, field=None):
        """The lines matching pattern (a regex, case-insensitive, or a
        function), or those not matching with prune."""
        def target(s):
            if field is None:
                return s
            parts = s.split()
            return parts[field] if -len(parts) <= field < len(parts) else ""
        pred = (lambda x: re.search(pattern, x, re.IGNORECASE)) if isinstance(pattern, str) else pattern
        return SList([el for el in self if bool(pred(target(el))) != bool(prune)])

    def fields(self, *fields):
        """Whitespace-separated fields of each line, like awk."""
        if not fields:
            return [el.split() for el in self]
        res = SList()
        for parts in (el.split() for el in self):
            picked = [parts[f] for f in fields if -len(parts) <= f < len(parts)]
            if picked:
                res.append(" ".join(picked))
        return res

    def sort(self, field=None, nums=False):
        if field is None and not nums:
            return SList(sorted(self))
        def key(s):
            v = s.split()[field] if field is not None and s.split() else s
            if nums:
                digits = "".join(ch for ch in v if ch.isdigit())
                return int(digits) if digits else 0
            return v
        return SList(sorted(self, key=key))


def output_of(cmd):
    """What cmd prints, stdout and stderr merged."""
    import subprocess

    flush_streams()
    out = subprocess.run([SHELL, "-c", cmd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT).stdout
    return out.decode("utf-8", "replace")


def flush_streams():
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:  # noqa: BLE001
            pass


def run_process(argv, env=None, stdin=None):
    """Runs argv and returns its exit status (negative for a signal, as
    subprocess gives it). Its output goes straight to the run's fd 1 and 2
    as it is printed, unless the code redirected sys.stdout or sys.stderr
    (%%capture), which then get it. An interrupt kills it."""
    import subprocess

    flush_streams()
    std = terp.worker.std
    own = sys.stdout is std.stdout and sys.stderr is std.stderr
    pipe = None if own else subprocess.PIPE
    p = subprocess.Popen(argv, env=env, stdout=pipe, stderr=pipe,
                         stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE)
    try:
        if stdin is not None:
            threading.Thread(target=feed_stdin, args=(p.stdin, stdin), daemon=True).start()
        if not own:
            pump(p)
        return p.wait()
    except BaseException:
        p.kill()
        p.wait()
        raise


def feed_stdin(f, data):
    try:
        with f:
            f.write(data.encode())
    except (BrokenPipeError, OSError):
        pass


def pump(p):
    """Copies p's stdout and stderr to sys.stdout and sys.stderr."""
    import codecs
    import selectors

    sel = selectors.DefaultSelector()
    for f, stream in ((p.stdout, sys.stdout), (p.stderr, sys.stderr)):
        sel.register(f, selectors.EVENT_READ, (stream, codecs.getincrementaldecoder("utf-8")("replace")))
    while sel.get_map():
        for key, _ in sel.select():
            stream, decoder = key.data
            data = os.read(key.fd, 65536)
            stream.write(decoder.decode(data, final=not data))
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()
    sel.close()


# --- running bodies ------------------------------------------------------------


class Body:
    """Code a magic runs as a cell: a cell magic's body, %time's statement.
    It is compiled with the transform if it does not compile, under a file
    name and after as many blank lines as give its tracebacks and
    SyntaxErrors the cell's own line numbers."""

    def __init__(self, source, filename, offset):
        self.source = source
        self.filename = filename
        self.offset = offset

    @classmethod
    def of_cell_magic(cls, cell, frame, name):
        """The body of %%name, called from frame: under the cell's own file
        name, after the magic's line, when the call is the transform's;
        otherwise (the code called run_cell_magic) under a name of its own."""
        if frame is not None:
            filename, lineno = frame.f_code.co_filename, frame.f_lineno
            if linecache.getline(filename, lineno).startswith("%%" + name):
                return cls(cell, filename, lineno)
        filename = "<%%%%%s>" % name
        linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
        return cls(cell, filename, 0)

    def compile(self):
        """(code, last, imports) as worker.py's compile_cell gives them."""
        text = "\n" * self.offset + self.source
        return compile_source(lambda c: terp.compile_cell(c, self.filename, text), text)

    def run(self, globals_, locals_=None, show=True):
        """Runs the body; its trailing value is displayed if show, and
        returned."""
        body, last, imports = self.compile()
        if imports:
            terp.worker.await_prewarm()
        exec(body, globals_, locals_)
        if last is None:
            return None
        value = eval(last, globals_, locals_)
        if show and value is not None:
            display(value)
        return value


def split_args(line):
    import shlex

    try:
        return shlex.split(line)
    except ValueError as e:
        raise UsageError(str(e)) from None


def parse_options(line, flags, valued=(), name=""):
    """Splits a magic's line into its options ({"-x": value or True}) and
    the rest, as written: options come first; `--` ends them."""
    opts, rest = {}, line.lstrip()
    while rest.startswith("-"):
        token, _, after = rest.partition(" ")
        if token == "--":
            rest = after.lstrip()
            break
        key = token if token.startswith("--") else token[:2]
        if key in valued:
            value = token[2:] if not token.startswith("--") and len(token) > 2 else None
            if value is None:
                value, _, after = after.lstrip().partition(" ")
                if not value:
                    raise UsageError("option %s of %%%s requires an argument" % (key, name))
            opts[key] = value
        elif key in flags:
            for ch in token[1:] if not token.startswith("--") else [token]:
                flag = "-" + ch if not token.startswith("--") else token
                if flag not in flags:
                    raise UsageError("option %s not recognized by %%%s" % (flag, name))
                opts[flag] = True
        else:
            raise UsageError("option %s not recognized by %%%s" % (token, name))
        rest = after.lstrip()
    return opts, rest


# --- pip -----------------------------------------------------------------------

# `!pip ...`, `!pip3`, `!python -m pip`, `!python3 -m pip` and
# `!{sys.executable} -m pip` are %pip, so that they install where %pip does.
PIP_COMMAND = re.compile(r"\s*(?:\S*/)?(?:pip3?(?:\.\d+)?|python3?(?:\.\d+)?\s+-m\s+pip)(?=\s|$)(.*)$", re.S)

NO_NETWORK = ("terp: this sandbox has no network, so pip cannot reach the package index (pypi.org). "
              "To allow it, run terp with --network allowlist (its default allowlist is pypi.org and "
              "files.pythonhosted.org); in a config file: network = \"allowlist\".")
NO_PIP = "terp: pip is not installed in this sandbox's Python, so %pip cannot install packages."

# pip install's options that take a value, so that it is not taken for a
# requirement.
PIP_VALUED = {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
              "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--src",
              "--upgrade-strategy", "--platform", "--python-version", "--implementation", "--abi",
              "--progress-bar", "--cache-dir", "--log", "--proxy", "--retries", "--timeout",
              "--exists-action", "--trusted-host", "--cert", "--client-cert", "--global-option",
              "--install-option", "--config-settings", "-C", "--report", "--only-binary", "--no-binary"}


@magic("line", "pip")
def pip_magic(shell, line, frame):
    """Runs pip in the sandbox's Python, as `python3 -m pip LINE`.

    Packages are installed in the conversation's package directory (the
    user site of /work/.terp/python), which survives steps and pauses, and
    can be imported at once."""
    return pip_install(shell, line)


def pip_install(shell, line):
    import importlib.util
    import shlex
    import site

    if importlib.util.find_spec("pip") is None:
        print(NO_PIP, file=sys.stderr)
        return

    args = pip_args(line)
    env = dict(os.environ, PYTHONUSERBASE=site.getuserbase(), PIP_BREAK_SYSTEM_PACKAGES="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PIP_ROOT_USER_ACTION="ignore")
    command = next((a for a in args if not a.startswith("-")), "")
    if command == "install":
        if not any(a.split("=")[0] in ("-t", "--target", "--prefix", "--root") for a in args):
            env["PIP_USER"] = "1"
        if needs_index(args) and offline():
            print(NO_NETWORK, file=sys.stderr)
            return
    code = run_process([SHELL, "-c", shlex.quote(sys.executable) + " -m pip " + line], env=env)
    shell.user_ns["_exit_code"] = code
    terp.add_user_site()
    importlib.invalidate_caches()
    print(PIP_NOTE)


def pip_args(line):
    """pip's arguments in line, up to the first shell operator."""
    import shlex

    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        tokens = line.split()
    for i, t in enumerate(tokens):
        if re.match(r"\d*[<>]|[|;&]", t):
            return tokens[:i]
    return tokens


def needs_index(args):
    """Whether `pip install args` must reach an index that may be PyPI: not
    with --no-index, another index or local files alone."""
    if os.environ.get("PIP_INDEX_URL") or os.environ.get("PIP_FIND_LINKS"):
        return False
    reqs, i = [], args.index("install") + 1
    while i < len(args):
        a = args[i]
        name = a.split("=")[0]
        if name in ("--no-index", "-i", "--index-url", "-f", "--find-links"):
            return False
        if name in ("-r", "--requirement", "-c", "--constraint"):
            return True
        if a.startswith("-"):
            if name in PIP_VALUED and "=" not in a and len(a) == len(name):
                if name in ("-e", "--editable") and i + 1 < len(args):
                    reqs.append(args[i + 1])
                i += 1
        else:
            reqs.append(a)
        i += 1
    return not reqs or not all(os.path.exists(r) for r in reqs)


def offline():
    """Whether pypi.org is out of reach: no proxy is set and its name does
    not resolve within NETWORK_WAIT."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")):
        return False
    import socket

    resolved = threading.Event()

    def resolve():
        try:
            socket.getaddrinfo("pypi.org", 443)
            resolved.set()
        except OSError:
            pass

    t = threading.Thread(target=resolve, daemon=True)
    t.start()
    t.join(NETWORK_WAIT)
    return not resolved.is_set()


@magic("line", "conda")
def conda_magic(shell, line, frame):
    """conda is not available in terp's sandbox: use %pip."""
    print("terp: conda is not available in this sandbox; install packages with %pip install instead.",
          file=sys.stderr)


# --- line magics ---------------------------------------------------------------


@magic("line", "matplotlib")
def matplotlib_magic(shell, line, frame):
    """Sets matplotlib's backend. terp shows figures as images, as with
    %matplotlib inline: there is nothing to set."""
    args = split_args(line)
    if "-l" in args or "--list" in args:
        print("Available matplotlib backends: ['inline']")
        return
    gui = next((a for a in args if not a.startswith("-")), "inline")
    if gui.lower() not in ("inline", "agg", "auto"):
        print("%%matplotlib %s is not available: terp shows figures as images only, as %%matplotlib inline does."
              % gui)


@magic("line", "config")
def config_magic(shell, line, frame):
    """Accepts IPython's configuration statements; InlineBackend's have
    nothing to configure in terp, others are ignored."""
    line = line.strip()
    if not line:
        print("Available objects for config:\n    InlineBackend")
        return
    m = re.match(r"([A-Za-z_]\w*)(\.\w+)*\s*(=.*)?$", line)
    if not m:
        raise UsageError("Invalid config statement: %r, should be `Class.trait = value`." % line)
    if m.group(1) != "InlineBackend":
        print("terp ignores %%config %s." % line)


@magic("line", "load_ext", "reload_ext", "unload_ext", "autoreload", "aimport")
def accepted_magic(shell, line, frame):
    """Accepted and ignored: extensions and autoreload have nothing to do in
    terp."""


@magic("line", "xmode")
def xmode_magic(shell, line, frame):
    """Switches the exception reporting mode (terp's tracebacks stay plain)."""
    modes = ["Plain", "Context", "Verbose", "Minimal"]
    arg = line.strip()
    if not arg:
        new = modes[(modes.index(shell.xmode) + 1) % len(modes)]
    else:
        new = next((m for m in modes if m.lower() == arg.lower()), None)
        if new is None:
            raise UsageError("Unrecognized mode in FormattedTB: <%s>" % arg)
    shell.xmode = new
    print("Exception reporting mode: %s" % new)


@magic("line", "precision")
def precision_magic(shell, line, frame):
    """Returns the float format IPython would use; terp's output keeps
    Python's repr."""
    arg = line.strip()
    if not arg:
        return "%r"
    if "%" in arg:
        return arg
    try:
        return "%%.%if" % int(arg)
    except ValueError:
        raise UsageError("Precision must be int or format string, not %s" % arg) from None


@magic("line", "reset")
def reset_magic(shell, line, frame):
    """Removes every name from the namespace; -f does not ask (terp cannot
    ask: it has no input)."""
    opts, _ = parse_options(line, ("-f", "-s", "--aggressive"), name="reset")
    if "-f" not in opts:
        print("Once deleted, variables cannot be recovered. Proceed (y/[n])? ")
        print("Nothing done.")
        return
    keep = {"__name__", "__builtins__", "__doc__", "__file__", "__cached__", "__spec__", "__loader__", "__package__"}
    for name in [n for n in shell.user_ns if n not in keep]:
        del shell.user_ns[name]


@magic("line", "lsmagic")
def lsmagic_magic(shell, line, frame):
    """Lists the magics."""
    print("Available line magics:\n%s\n\nAvailable cell magics:\n%s\n\n"
          "Automagic is ON, %% prefix IS NOT needed for line magics."
          % ("  ".join("%" + n for n in sorted(shell.line_magics)),
             "  ".join("%%" + n for n in sorted(shell.cell_magics))))


@magic("line", "time", expand=False)
def time_magic(shell, line, frame):
    """Times a statement or expression: its CPU and wall-clock time are
    printed, and the value of an expression is returned."""
    linecache.cache["<timed exec>"] = (len(line), None, [line + "\n"], "<timed exec>")
    return timed(shell, Body(line, "<timed exec>", 0), local_scope(shell, frame))


@magic("cell", "time", expand=False)
def time_cell_magic(shell, line, cell, where):
    """Times the cell: its CPU and wall-clock time are printed, and the
    value of its last expression is returned."""
    return timed(shell, where, None)


def local_scope(shell, frame):
    if frame is None or frame.f_locals is shell.user_ns:
        return None
    return frame.f_locals


def timed(shell, body, local_ns):
    import ast
    import resource

    text = "\n" * body.offset + body.source
    tree = compile_source(lambda c: ast.parse(c, body.filename, "exec"), text)
    if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree)):
        terp.worker.await_prewarm()
    last = None
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
        code, mode = compile(ast.Expression(tree.body[0].value), body.filename, "eval", dont_inherit=True), "eval"
    else:
        if len(tree.body) > 1 and isinstance(tree.body[-1], ast.Expr):
            last = compile(ast.Expression(tree.body.pop().value), body.filename, "eval", dont_inherit=True)
        code, mode = compile(tree, body.filename, "exec", dont_inherit=True), "exec"
    glob = shell.user_ns
    wall = time.time()
    start = resource.getrusage(resource.RUSAGE_SELF)
    if mode == "eval":
        out = eval(code, glob, local_ns)
    else:
        exec(code, glob, local_ns)
        out = eval(last, glob, local_ns) if last is not None else None
    end = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.time() - wall
    user, system = end.ru_utime - start.ru_utime, end.ru_stime - start.ru_stime
    print("CPU times: user %s, sys: %s, total: %s" % (format_time(user), format_time(system), format_time(user + system)))
    print("Wall time: %s" % format_time(wall))
    return out


def format_time(timespan, precision=3):
    """A duration as IPython's %time and %timeit print it."""
    import math

    if timespan >= 60.0:
        parts = [("d", 60 * 60 * 24), ("h", 60 * 60), ("min", 60), ("s", 1)]
        out, leftover = [], timespan
        for suffix, length in parts:
            value = int(leftover / length)
            if value > 0:
                leftover = leftover % length
                out.append("%s%s" % (value, suffix))
            if leftover < 1:
                break
        return " ".join(out)
    units = ["s", "ms", "us", "ns"]
    encoding = getattr(sys.stdout, "encoding", None)
    if encoding:
        try:
            "\xb5".encode(encoding)
            units = ["s", "ms", "\xb5s", "ns"]
        except (UnicodeError, LookupError):
            pass
    order = min(-int(math.floor(math.log10(timespan)) // 3), 3) if timespan > 0.0 else 3
    return "%.*g %s" % (precision, timespan * [1, 1e3, 1e6, 1e9][order], units[order])


class TimeitResult:
    """What %timeit -o returns: the loops, the runs and their times."""

    def __init__(self, loops, repeat, best, worst, all_runs, compile_time, precision):
        self.loops = loops
        self.repeat = repeat
        self.best = best
        self.worst = worst
        self.all_runs = all_runs
        self.compile_time = compile_time
        self._precision = precision
        self.timings = [dt / loops for dt in all_runs]

    @property
    def average(self):
        import math

        return math.fsum(self.timings) / len(self.timings)

    @property
    def stdev(self):
        import math

        mean = self.average
        return (math.fsum([(x - mean) ** 2 for x in self.timings]) / len(self.timings)) ** 0.5

    def __str__(self):
        pm = "+-"
        encoding = getattr(sys.stdout, "encoding", None)
        if encoding:
            try:
                "\xb1".encode(encoding)
                pm = "\xb1"
            except (UnicodeError, LookupError):
                pass
        return "{mean} {pm} {std} per loop (mean {pm} std. dev. of {runs} run{rs}, {loops:,} loop{ls} each)".format(
            pm=pm, runs=self.repeat, loops=self.loops, ls="" if self.loops == 1 else "s",
            rs="" if self.repeat == 1 else "s", mean=format_time(self.average, self._precision),
            std=format_time(self.stdev, self._precision))

    def __repr__(self):
        return "<TimeitResult : %s>" % self


@magic("line", "timeit", expand=False)
def timeit_magic(shell, line, frame):
    """Times a statement over many loops, as IPython's %timeit: -n N loops,
    -r R runs (7), -p P digits (3), -q prints nothing, -o returns the
    TimeitResult, -t and -c time with time.time and time.process_time."""
    return timeit_run(shell, line, None, local_scope(shell, frame))


@magic("cell", "timeit", expand=False)
def timeit_cell_magic(shell, line, cell, where):
    """Times the cell over many loops; the magic's line is its setup. The
    options are %timeit's."""
    return timeit_run(shell, line, where, None)


def timeit_run(shell, line, body, local_ns):
    import ast
    import timeit

    opts, stmt = parse_options(line, ("-q", "-o", "-t", "-c"), ("-n", "-r", "-p"), name="timeit")
    try:
        number, repeat, precision = int(opts.get("-n", 0)), int(opts.get("-r", 7)), int(opts.get("-p", 3))
    except ValueError as e:
        raise UsageError(str(e)) from None
    if body is None and not stmt.strip():
        return None
    timer_func = time.time if "-t" in opts else time.process_time if "-c" in opts else timeit.default_timer
    if body is None:
        setup, stmt = Body("pass", "<magic-timeit-setup>", 0), Body(stmt, "<magic-timeit-stmt>", 0)
        linecache.cache[stmt.filename] = (len(stmt.source), None, [stmt.source + "\n"], stmt.filename)
    else:
        setup, stmt = Body(stmt or "pass", "<magic-timeit-setup>", 0), body

    def parse(b):
        return compile_source(lambda c: ast.parse(c, b.filename, "exec"), "\n" * b.offset + b.source)

    setup_tree, stmt_tree = parse(setup), parse(stmt)
    if any(isinstance(n, (ast.Import, ast.ImportFrom)) for t in (setup_tree, stmt_tree) for n in ast.walk(t)):
        terp.worker.await_prewarm()
    template = ast.parse("def inner(_it, _timer):\n    setup\n    _t0 = _timer()\n    for _i in _it:\n"
                         "        stmt\n    _t1 = _timer()\n    return _t1 - _t0\n")
    inner = template.body[0]
    inner.body[0:1] = setup_tree.body or [ast.Pass()]
    loop = next(n for n in inner.body if isinstance(n, ast.For))
    loop.body = stmt_tree.body or [ast.Pass()]
    ast.fix_missing_locations(template)
    t0 = time.perf_counter()
    code = compile(template, stmt.filename if body is not None else "<magic-timeit>", "exec", dont_inherit=True)
    compile_time = time.perf_counter() - t0
    glob, ns, shadowed = shell.user_ns, {}, {}
    if local_ns:
        shadowed = {k: v for k, v in glob.items() if k in local_ns}
        glob.update(local_ns)
    try:
        exec(code, glob, ns)
        timer = timeit.Timer(timer=timer_func)
        timer.inner = ns["inner"]
        if number == 0:
            # As IPython's autorange: loops enough for 0.2 s.
            for index in range(10):
                number = 10 ** index
                if timer.timeit(number) >= 0.2:
                    break
        all_runs = timer.repeat(repeat, number)
    finally:
        if local_ns:
            for k in local_ns:
                glob.pop(k, None)
            glob.update(shadowed)
    best, worst = min(all_runs) / number, max(all_runs) / number
    result = TimeitResult(number, repeat, best, worst, all_runs, compile_time, precision)
    if "-q" not in opts:
        if worst > 4 * best and best > 0 and worst > 1e-6:
            print("The slowest run took %0.2f times longer than the fastest. This could mean that an "
                  "intermediate result is being cached." % (worst / best))
        print(result)
        if compile_time > 0.1:
            print("Compiler time: %.2f s" % compile_time)
    if "-o" in opts:
        return result
    return None


@magic("line", "cd")
def cd_magic(shell, line, frame):
    """Changes the working directory and prints the new one: `%cd -` goes
    back to the last, `%cd` alone to the home directory, -q is quiet."""
    opts, target = {}, line.strip()
    if not re.match(r"-\d*$", target):  # not `%cd -` nor `%cd -2`
        opts, target = parse_options(line, ("-q",), name="cd")
        target = target.strip()
    if len(target) > 1 and target[0] == target[-1] and target[0] in "'\"":
        target = target[1:-1]
    if target == "-":
        if len(shell.dir_history) < 2:
            raise UsageError("%cd -: No previous directory to change to.")
        target = shell.dir_history[-2]
    elif re.match(r"-\d+$", target):
        try:
            target = shell.dir_history[int(target[1:])]
        except IndexError:
            print("The requested directory does not exist in history.")
            return
    try:
        os.chdir(os.path.expanduser(target or "~"))
    except OSError as e:
        print(e)
        return
    shell.dir_history.append(os.getcwd())
    if "-q" not in opts:
        print(os.getcwd())


@magic("line", "pwd")
def pwd_magic(shell, line, frame):
    """Returns the working directory."""
    return os.getcwd()


@magic("line", "env")
def env_magic(shell, line, frame):
    """Gets, sets or lists environment variables: `%env` lists them (values
    of names with key, token or secret hidden), `%env VAR` returns one,
    `%env VAR=value` and `%env VAR value` set one."""
    if line.strip():
        bits = line.split("=" if "=" in line else " ")
        if len(bits) == 1:
            key = line.strip()
            if key in os.environ:
                return os.environ[key]
            raise UsageError("Environment does not have key: {0}".format(key))
        return set_env_magic(shell, line, frame)
    env = dict(os.environ)
    for key in env:
        if any(s in key.lower() for s in ("key", "token", "secret")):
            env[key] = "<hidden>"
    return env


@magic("line", "set_env")
def set_env_magic(shell, line, frame):
    """Sets an environment variable: `%set_env VAR=value` or `VAR value`."""
    bits = line.split("=" if "=" in line else " ", 1)
    if not line.strip() or len(bits) < 2:
        raise UsageError("usage is 'set_env var=val'")
    var, val = bits[0].strip(), bits[1].strip()
    if re.match(r".*\s.*", var):
        raise UsageError("refusing to set env var with whitespace: '{0}'".format(val))
    os.environ[var] = val
    print("env: {0}={1}".format(var, val))


@magic("line", "who_ls")
def who_ls_magic(shell, line, frame):
    """Returns the sorted names of the namespace's variables, of the given
    types only if any are named."""
    ns = shell.user_ns
    names = [n for n in ns if not n.startswith("_")]
    types_ = set(line.split())
    if types_:
        names = [n for n in names if type(ns[n]).__name__ in types_]
    return sorted(names)


@magic("line", "who")
def who_magic(shell, line, frame):
    """Prints the namespace's variables, of the given types only if any
    are named."""
    names = who_ls_magic(shell, line, frame)
    if not names:
        print("No variables match your requested type." if line.strip() else "Interactive namespace is empty.")
        return
    count = 0
    for name in names:
        print(name + "\t", end=" ")
        count += 1
        if count > 8:
            count = 0
            print()
    print()


@magic("line", "whos")
def whos_magic(shell, line, frame):
    """Prints a table of the namespace's variables, their types and values."""
    names = who_ls_magic(shell, line, frame)
    if not names:
        print("No variables match your requested type." if line.strip() else "Interactive namespace is empty.")
        return
    values = [shell.user_ns[n] for n in names]
    typenames = [type(v).__name__ for v in values]
    varwidth = max(max(map(len, names)), len("Variable")) + 3
    typewidth = max(max(map(len, typenames)), len("Type")) + 3
    print("Variable".ljust(varwidth) + "Type".ljust(typewidth) + " Data/Info\n" +
          "-" * (varwidth + typewidth + len("Data/Info") + 1))
    ndarray = getattr(sys.modules.get("numpy"), "ndarray", None)
    for name, value, typename in zip(names, values, typenames):
        print("{0:<{1}}{2:<{3}}".format(name, varwidth, typename, typewidth), end=" ")
        if typename in ("dict", "list", "tuple"):
            print("n=" + str(len(value)))
        elif ndarray is not None and isinstance(value, ndarray):
            shape = str(value.shape).replace(",", "").replace(" ", "x")[1:-1]
            nbytes = value.size * value.itemsize
            text = "%s: %s elems, type `%s`, %s bytes" % (shape, value.size, value.dtype, nbytes)
            if nbytes >= 100000:
                text += " (%s kb)" % (nbytes / 1024) if nbytes < 1048576 else " (%s Mb)" % (nbytes / 1048576)
            print(text)
        else:
            try:
                text = str(value)
            except Exception:  # noqa: BLE001
                text = "<object with id %d (str() failed)>" % id(value)
            text = text.replace("\n", "\\n")
            print(text if len(text) < 50 else text[:25] + "<...>" + text[-25:])


# IPython's shell aliases on Linux, without --color, whose escapes the model
# would read, and without the -i of cp, mv and rm, which would ask on an
# input that terp does not have.
ALIASES = {"ls": "ls -F", "ll": "ls -F -o", "cat": "cat", "cp": "cp", "mv": "mv", "rm": "rm",
           "mkdir": "mkdir", "rmdir": "rmdir"}


def alias_magic(command):
    def run(shell, line, frame):
        shell_command(shell, (command + " " + line).strip())
    run.__doc__ = "Runs `%s` with the system shell." % command
    return run


for _name, _command in ALIASES.items():
    magic("line", _name)(alias_magic(_command))


def shell_command(shell, cmd):
    """Runs cmd with the system shell and sets _exit_code as IPython does:
    a command a signal killed has minus the signal's number."""
    code = run_process([SHELL, "-c", cmd])
    shell.user_ns["_exit_code"] = -(code - 128) if code > 128 else code


@magic("line", "sx", "system")
def sx_magic(shell, line, frame):
    """Runs a shell command and returns its output's lines (an SList)."""
    return SList(output_of(line).splitlines())


@magic("line", "run")
def run_magic(shell, line, frame):
    """Runs a Python file as a program (__name__ is "__main__", sys.argv its
    arguments), then puts the names it defined in the namespace; -i runs it
    in the namespace itself."""
    opts, rest = parse_options(line, ("-i", "-n", "-t"), name="run")
    args = split_args(rest)
    if not args:
        raise UsageError("%run: you must provide at least a filename.")
    path = os.path.expanduser(args[0])
    if not os.path.isfile(path) and os.path.isfile(path + ".py"):
        path += ".py"
    if not os.path.isfile(path):
        raise UsageError("File `%r` not found." % args[0])
    with open(path, encoding="utf-8") as f:
        source = f.read()
    filename = os.path.abspath(path)
    compile_code = lambda c: compile(c, filename, "exec", dont_inherit=True)  # noqa: E731
    code = compile_source(compile_code, source) if path.endswith(".ipy") else compile_code(source)
    terp.worker.await_prewarm()
    if "-i" in opts:
        main = None
        ns = shell.user_ns
    else:
        main = types.ModuleType("__main__" if "-n" not in opts else os.path.splitext(os.path.basename(path))[0])
        main.__dict__.update(__builtins__=builtins, __file__=filename)
        ns = main.__dict__
    saved = sys.argv, sys.modules.get("__main__")
    sys.argv = [path] + args[1:]
    if main is not None and "-n" not in opts:
        sys.modules["__main__"] = main
    started = time.time()
    try:
        exec(code, ns)
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    finally:
        sys.argv = saved[0]
        if saved[1] is not None:
            sys.modules["__main__"] = saved[1]
        if main is not None:
            shell.user_ns.update((k, v) for k, v in ns.items() if not (k.startswith("__") and k.endswith("__")))
    if "-t" in opts:
        print("\nIPython CPU timings (estimated):\n    Wall time: %10.2f s." % (time.time() - started))


@magic("line", "pinfo")
def pinfo_magic(shell, line, frame):
    """Shows what an object is: its signature, docstring, file and type."""
    pinfo(shell, line.strip(), frame, 0)


@magic("line", "pinfo2")
def pinfo2_magic(shell, line, frame):
    """Shows what an object is, with its source."""
    pinfo(shell, line.strip(), frame, 1)


@magic("line", "psearch")
def psearch_magic(shell, line, frame):
    """Lists the names that match a pattern with wildcards: `np.*sum*?`."""
    import fnmatch

    pattern = line.strip().split()[0] if line.strip() else "*"
    base, _, pat = pattern.rpartition(".")
    if base:
        found, obj = lookup(shell, base, frame)
        if not found:
            return
        names = dir(obj)
    else:
        names = set(shell.user_ns) | set(vars(builtins))
    hidden = not pat.startswith("_")
    for name in sorted(n for n in names if fnmatch.fnmatchcase(n, pat) and not (hidden and n.startswith("_"))):
        print(base + "." + name if base else name)


def lookup(shell, name, frame):
    """(True, the object named name) in the caller's namespace, or (False, None)."""
    first, *attrs = name.split(".")
    for ns in (frame.f_locals if frame is not None else {}, shell.user_ns, vars(builtins)):
        if first in ns:
            obj = ns[first]
            break
    else:
        return False, None
    for attr in attrs:
        try:
            obj = getattr(obj, attr)
        except Exception:  # noqa: BLE001
            return False, None
    return True, obj


def pinfo(shell, name, frame, detail):
    import inspect

    if name.startswith("%"):
        table = shell.cell_magics if name.startswith("%%") else shell.line_magics
        fn = table.get(name.lstrip("%"))
        if fn is None:
            print("Object `%s` not found." % name)
            return
        print(format_fields([("Docstring", inspect.getdoc(fn) or "<no docstring>")]))
        return
    found, obj = lookup(shell, name, frame)
    if not found:
        print("Object `%s` not found." % name)
        return
    fields = []
    doc = inspect.getdoc(obj) or "<no docstring>"
    source = None
    if detail:
        try:
            source = inspect.getsource(obj)
            if len(source) > SOURCE_LIMIT:
                source = source[:SOURCE_LIMIT] + "\n[... source cut at %d of %d characters ...]" % (
                    SOURCE_LIMIT, len(source))
        except (OSError, TypeError):
            pass
    try:
        file = inspect.getsourcefile(obj) or inspect.getfile(obj)
    except TypeError:
        file = None
    simple = inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj) or inspect.ismethoddescriptor(obj)
    if inspect.isclass(obj) or simple:
        fields.append(("Init signature" if inspect.isclass(obj) else "Signature", signature(name, obj)))
        if not (source and (obj.__doc__ or "") in source):  # the source shows it
            fields.append(("Docstring", doc))
        if source:
            fields.append(("Source", source))
        elif inspect.isclass(obj) and obj.__init__ is not object.__init__:
            init = inspect.getdoc(obj.__init__)
            if init and init != doc:
                fields.append(("Init docstring", init))
        fields.append(("File", file))
        fields.append(("Type", type(obj).__name__))
    else:
        if callable(obj):
            fields.append(("Signature", signature(name, obj)))
        fields.append(("Type", type(obj).__name__))
        try:
            form = str(obj)
        except Exception:  # noqa: BLE001
            form = None
        if form is not None and not detail and len(form) > 200:
            form = form[:97] + " <...> " + form[-97:]
        fields.append(("String form", terp.cut_repr(form) if form is not None else None))
        try:
            fields.append(("Length", str(len(obj))))
        except Exception:  # noqa: BLE001
            pass
        fields.append(("File", file if inspect.ismodule(obj) else None))
        fields.append(("Source", source) if source else ("Docstring", doc))
    print(format_fields(fields))


def signature(name, obj):
    import inspect

    try:
        return name + str(inspect.signature(obj))
    except (TypeError, ValueError):
        return None


def format_fields(fields):
    """Fields as IPython's pinfo prints them: a title, padded, and its text,
    on the next lines when it has several."""
    fields = [(title, text) for title, text in fields if text is not None]
    width = max(len(title) for title, _ in fields)
    out = ""
    for title, text in fields:
        text = text.strip("\n")
        out += title + ":" + " " * (width - len(title)) + ("\n" if "\n" in text else " ") + text + "\n"
    return out


USAGE = """terp runs this code as a Jupyter notebook cell does:
  !cmd            runs cmd with the system shell (x = !cmd gives its output's lines)
  %magic args     runs a line magic; %lsmagic lists them
  %%magic args    on a cell's first line runs the cell with a cell magic
  object?         shows an object's signature, docstring, file and type (?? adds its source)
  display(obj)    shows obj as text; figures and images are saved as /work/figure_N.png"""


# --- cell magics ---------------------------------------------------------------


@magic("cell", "capture")
def capture_magic(shell, line, cell, where):
    """Runs the cell and captures what it prints and displays: `%%capture
    [--no-stdout] [--no-stderr] [--no-display] [var]`; var then holds it
    (.stdout, .stderr, .outputs, .show())."""
    opts, rest = parse_options(line, ("--no-stdout", "--no-stderr", "--no-display"), name="capture")
    args = split_args(rest)
    if len(args) > 1 or (args and not args[0].isidentifier()):
        raise UsageError("%%%%capture takes one variable name, not %r" % rest)
    capture = Capture("--no-stdout" not in opts, "--no-stderr" not in opts, "--no-display" not in opts)
    with capture as captured:
        try:
            where.run(shell.user_ns)
        finally:
            if args:
                shell.user_ns[args[0]] = captured


@magic("cell", "writefile", "file")
def writefile_magic(shell, line, cell, where):
    """Writes the cell to a file: `%%writefile [-a] file`."""
    opts, rest = parse_options(line, ("-a", "--append"), name="writefile")
    args = split_args(rest)
    if len(args) != 1:
        raise UsageError("the following arguments are required: filename" if not args else
                         "unrecognized arguments: %s" % " ".join(args[1:]))
    filename = os.path.expanduser(args[0])
    append = "-a" in opts or "--append" in opts
    if os.path.exists(filename):
        print(("Appending to %s" if append else "Overwriting %s") % filename)
    else:
        print("Writing %s" % filename)
    with open(filename, "a" if append else "w", encoding="utf-8") as f:
        f.write(cell)


def script_magic(program):
    def run(shell, line, cell, where):
        opts, rest = parse_options(line, ("--raise-error", "--no-raise-error"), name=program or "script")
        argv = split_args(rest)
        if program is not None:
            argv = [program] + argv
        if not argv:
            raise UsageError("%%script needs the program to run: %%script bash")
        if argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        try:
            code = run_process(argv, stdin=cell)
        except FileNotFoundError:
            print("Couldn't find program: %r" % argv[0])
            return
        if "--raise-error" in opts and code != 0:
            import subprocess

            raise subprocess.CalledProcessError(code, argv)
    run.__doc__ = ("Runs the cell with %s, its output live; --raise-error fails on a nonzero exit."
                   % (program or "the program named first: `%%script bash`"))
    return run


magic("cell", "script")(script_magic(None))
for _name, _program in (("bash", "bash"), ("sh", "sh"), ("python", "python3"), ("python3", "python3"),
                        ("perl", "perl"), ("ruby", "ruby")):
    magic("cell", _name)(script_magic(_program))


@magic("cell", "html", "HTML", "markdown", "latex", "svg", "SVG", expand=False)
def text_magic(shell, line, cell, where):
    """Shows the cell as its text, which is what terp shows of HTML,
    Markdown, LaTeX and SVG."""
    emit(("text", terp.cut_repr(cell.rstrip("\n"))))


# --- display -------------------------------------------------------------------

CAPTURES = []  # the %%capture blocks in progress, innermost last


def display(*objs, include=None, exclude=None, metadata=None, transient=None, display_id=None, raw=False,
            clear=False, **kwargs):
    """Shows objs as a notebook would, as text in the output: a Figure or an
    image is saved as /work/figure_N.png (or .jpg) and one line names it,
    Markdown and LaTeX are their source, a DataFrame (or anything with a
    repr of its own) its repr, HTML its source. raw takes each obj for a
    dict of MIME type to data."""
    for obj in objs:
        if raw:
            out = pick(obj, wanted(include, exclude)) if isinstance(obj, dict) else ("text", str(obj))
        else:
            out = render(obj, include, exclude)
        if out is not None:
            emit(out)
    if display_id:
        return DisplayHandle(None if display_id is True else display_id)
    return None


def update_display(obj, *, display_id=None, **kwargs):
    """Shows obj again: terp's output cannot change what it showed."""
    display(obj, **kwargs)


def clear_output(wait=False):
    """Does nothing: terp's output cannot be cleared."""


def publish_display_data(data, metadata=None, source=None, *, transient=None, **kwargs):
    out = pick(data, wanted(None, None))
    if out is not None:
        emit(out)


class DisplayHandle:
    """What display(obj, display_id=...) returns."""

    def __init__(self, display_id=None):
        if display_id is None:
            display_id = os.urandom(16).hex()
        self.display_id = display_id

    def __repr__(self):
        return "<%s display_id=%s>" % (self.__class__.__name__, self.display_id)

    def display(self, obj, **kwargs):
        display(obj, **kwargs)

    def update(self, obj, **kwargs):
        display(obj, **kwargs)


def show_value(value, stream=None):
    """Shows a cell's trailing value (kernel mode) as display() would, on
    stream when given, and returns the text shown, or None."""
    out = render(value, None, None)
    return show(out, stream) if out is not None else None


def emit(out):
    """Shows out, or keeps it in the %%capture that captures displays."""
    stream = sys.stdout
    for capture in reversed(CAPTURES):
        if capture.display:
            capture.outputs.append(RichOutput(out))
            return
        if capture.stdout:
            stream = capture.saved[0]
    show(out, stream)


def show(out, stream=None):
    """Writes out: text as it is, an image saved and named in one line."""
    kind, payload = out
    if kind == "text":
        text = payload
    else:
        if kind == "figure":
            name = terp.save_figure(payload)
            # Not saved again after the run, unless it changes.
            payload._terp_saved = True
            payload.stale = False
        else:
            data, ext = payload
            name = terp.save_image(lambda f: f.write(data), ext)
        terp.worker.figures.append(name)
        text = "[image saved as %s]" % os.path.join(terp.work_dir, name)
    (stream or sys.stdout).write(text + "\n")
    return text


def wanted(include, exclude):
    return lambda mime: (not include or mime in include) and (not exclude or mime not in exclude)


# The MIME types of a bundle, in the order they are shown: an image, then
# the text a model reads best.
BUNDLE_ORDER = ("image/png", "image/jpeg", "text/markdown", "text/latex", "text/plain", "text/html",
                "image/svg+xml", "application/json")


def pick(bundle, want):
    for mime in BUNDLE_ORDER:
        if want(mime) and bundle.get(mime) is not None:
            return convert(mime, bundle[mime])
    for mime, data in bundle.items():
        if want(mime) and isinstance(data, str):
            return ("text", terp.cut_repr(data))
    return None


def convert(mime, data):
    if isinstance(data, tuple):  # (data, metadata)
        data = data[0]
    if mime in ("image/png", "image/jpeg"):
        if isinstance(data, str):
            import base64

            data = base64.b64decode(data)
        return ("image", (bytes(data), "png" if mime == "image/png" else "jpg"))
    if mime == "application/json" and not isinstance(data, str):
        import json

        data = json.dumps(data, indent=2, default=str)
    return ("text", terp.cut_repr(str(data)))


def real_method(obj, name):
    """obj's method name, as IPython looks for display hooks: never on a
    class, nor on an object that claims every attribute."""
    if isinstance(obj, type):
        return None
    try:
        if getattr(obj, "_ipython_canary_method_should_not_exist_", None) is not None:
            return None
        m = getattr(obj, name, None)
    except Exception:  # noqa: BLE001
        return None
    return m if callable(m) else None


def call_hook(method, *args, **kwargs):
    """A display hook's result, None if it has none or fails (as IPython,
    the next representation is used)."""
    try:
        result = method(*args, **kwargs)
    except Exception:  # noqa: BLE001
        return None
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
        result = result[0]
    return result


def own_repr(obj):
    """Whether obj's type has a __repr__ of its own: not object's, nor the
    placeholder of IPython's display objects."""
    for klass in type(obj).__mro__:
        if "__repr__" in vars(klass):
            return klass is not object and not (
                klass.__name__ in ("DisplayObject", "TextDisplayObject") and klass.__module__.startswith("IPython"))
    return False


def render(obj, include, exclude):
    """What display shows of obj: ("text", str), ("figure", Figure) or
    ("image", (bytes, ext)), or None when there is nothing to show.

    Images come first; then Markdown; then a repr of the object's own
    (DataFrames, and objects such as sympy's that also have LaTeX, which
    the repr reads better than); then LaTeX, HTML, SVG and JSON."""
    want = wanted(include, exclude)
    figure = getattr(sys.modules.get("matplotlib.figure"), "Figure", None)
    if figure is not None and isinstance(obj, figure):
        return ("figure", obj) if want("image/png") else None
    m = real_method(obj, "_ipython_display_")
    if m is not None:
        m()
        return None
    m = real_method(obj, "_repr_mimebundle_")
    if m is not None:
        bundle = call_hook(m, include=include, exclude=exclude)
        if isinstance(bundle, dict):
            out = pick(bundle, want)
            if out is not None:
                return out
    for mime, name in (("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"), ("text/markdown", "_repr_markdown_")):
        m = real_method(obj, name) if want(mime) else None
        data = call_hook(m) if m is not None else None
        if data is not None:
            return convert(mime, data)
    if want("text/plain") and own_repr(obj):
        return ("text", terp.cut_repr(repr(obj)))
    m = real_method(obj, "_repr_pretty_") if want("text/plain") else None
    if m is not None:
        printer = TextPrinter()
        try:
            m(printer, False)
            return ("text", terp.cut_repr(printer.text_so_far()))
        except Exception:  # noqa: BLE001
            pass
    for mime, name in (("text/latex", "_repr_latex_"), ("text/html", "_repr_html_"),
                       ("image/svg+xml", "_repr_svg_"), ("application/json", "_repr_json_")):
        m = real_method(obj, name) if want(mime) else None
        data = call_hook(m) if m is not None else None
        if data is not None:
            return convert(mime, data)
    if not want("text/plain"):
        return None
    return ("text", terp.cut_repr(repr(obj)))


class TextPrinter:
    """Enough of IPython's pretty printer for an object's _repr_pretty_."""

    def __init__(self):
        self.parts = []

    def text(self, obj):
        self.parts.append(str(obj))

    def breakable(self, sep=" "):
        self.parts.append(sep)

    def pretty(self, obj):
        self.parts.append(repr(obj))

    def begin_group(self, indent=0, open=""):
        self.parts.append(open)

    def end_group(self, dedent=0, close=""):
        self.parts.append(close)

    def group(self, indent=0, open="", close=""):
        import contextlib

        @contextlib.contextmanager
        def grouped():
            self.begin_group(indent, open)
            yield
            self.end_group(indent, close)
        return grouped()

    def indentation(self, *args):
        import contextlib

        return contextlib.nullcontext()

    def text_so_far(self):
        return "".join(self.parts)


class Capture:
    """%%capture's capture_output: Python-level, as IPython's is, so a
    subprocess's output is captured only when terp forwards it (`!cmd`)."""

    def __init__(self, stdout=True, stderr=True, display=True):
        self.stdout = stdout
        self.stderr = stderr
        self.display = display
        self.outputs = []
        self.saved = None

    def __enter__(self):
        self.saved = sys.stdout, sys.stderr
        out = err = None
        if self.stdout:
            out = sys.stdout = io.StringIO()
        if self.stderr:
            err = sys.stderr = io.StringIO()
        CAPTURES.append(self)
        return CapturedIO(out, err, self.outputs if self.display else None)

    def __exit__(self, *exc):
        sys.stdout, sys.stderr = self.saved
        CAPTURES.remove(self)
        return False


class CapturedIO:
    """What %%capture var puts in var: .stdout, .stderr, .outputs, and
    .show() (or calling it) to print them."""

    def __init__(self, stdout, stderr, outputs=None):
        self._stdout = stdout
        self._stderr = stderr
        self._outputs = outputs if outputs is not None else []

    def __str__(self):
        return self.stdout

    def __repr__(self):
        return "<CapturedIO: %d characters of stdout, %d of stderr, %d outputs>" % (
            len(self.stdout), len(self.stderr), len(self._outputs))

    @property
    def stdout(self):
        return self._stdout.getvalue() if self._stdout is not None else ""

    @property
    def stderr(self):
        return self._stderr.getvalue() if self._stderr is not None else ""

    @property
    def outputs(self):
        return list(self._outputs)

    def show(self):
        sys.stdout.write(self.stdout)
        sys.stderr.write(self.stderr)
        for output in self._outputs:
            output.show()

    __call__ = show


class RichOutput:
    """One display a %%capture kept."""

    def __init__(self, out):
        self.out = out

    @property
    def data(self):
        kind, payload = self.out
        if kind == "text":
            return {"text/plain": payload}
        if kind == "image":
            return {"image/png" if payload[1] == "png" else "image/jpeg": payload[0]}
        return {"text/plain": repr(payload)}

    def __repr__(self):
        return "<RichOutput %s>" % ", ".join(self.data)

    def show(self):
        emit(self.out)

    def display(self):
        self.show()


# --- IPython -------------------------------------------------------------------


def patch(module):
    """Makes the real IPython, as it is imported, use terp's get_ipython and
    display: this runs as soon as one of the modules that define them is
    executed, before IPython/__init__ or IPython.display bind them."""
    if module.__name__ == "IPython.core.getipython":
        module.get_ipython = terp.get_ipython
    elif module.__name__ == "IPython.core.display_functions":
        module.display = display
        module.update_display = update_display
        module.clear_output = clear_output
        module.publish_display_data = publish_display_data


class DisplayObject:
    """IPython.display's base: data given, read from a file, or (not
    fetched: terp has no browser) a URL."""

    binary = False

    def __init__(self, data=None, url=None, filename=None, metadata=None):
        if isinstance(data, os.PathLike):
            data = os.fspath(data)
        if isinstance(data, str):
            if data.startswith(("http://", "https://")) and url is None:
                url, data = data, None
            elif filename is None and len(data) < 4096 and "\n" not in data and os.path.exists(data):
                filename, data = data, None
        self.data = data
        self.url = url
        self.filename = None if filename is None else os.fspath(filename)
        self.metadata = metadata or {}
        if self.filename is not None:
            self.reload()

    def reload(self):
        with open(self.filename, "rb" if self.binary else "r") as f:
            self.data = f.read()

    def __repr__(self):
        return "<%s.%s object>" % (self.__class__.__module__, self.__class__.__name__)


class TextDisplayObject(DisplayObject):
    pass


class Markdown(TextDisplayObject):
    def _repr_markdown_(self):
        return self.data


class HTML(TextDisplayObject):
    def _repr_html_(self):
        return self.data


class Latex(TextDisplayObject):
    def _repr_latex_(self):
        return self.data


class Math(TextDisplayObject):
    def _repr_latex_(self):
        return r"$\displaystyle %s$" % (self.data or "").strip("$")


class Pretty(TextDisplayObject):
    def _repr_pretty_(self, pp, cycle):
        return pp.text(self.data)


class SVG(DisplayObject):
    def _repr_svg_(self):
        return self.data


class Javascript(TextDisplayObject):
    pass


class JSON(DisplayObject):
    def __init__(self, data=None, url=None, filename=None, expanded=False, metadata=None, root="root", **kwargs):
        super().__init__(data=data, url=url, filename=filename, metadata=metadata)
        if isinstance(self.data, str):
            import json

            try:
                self.data = json.loads(self.data)
            except ValueError:
                pass

    def _repr_json_(self):
        return self.data


class Image(DisplayObject):
    """An image from bytes or a file, shown by saving it under /work; PNG
    and JPEG only, and never from a URL."""

    binary = True

    def __init__(self, data=None, url=None, filename=None, format=None, embed=None, width=None, height=None,
                 retina=False, unconfined=False, metadata=None, alt=None):
        if data is None and url is None and filename is None:
            raise ValueError("No image data found. Expecting filename, url, or data.")
        super().__init__(data=data, url=url, filename=filename, metadata=metadata)
        self.width, self.height, self.alt = width, height, alt
        self.embed = embed if embed is not None else self.url is None
        if format is None:
            name = self.filename or self.url or ""
            format = os.path.splitext(name)[1].lstrip(".").lower() or None
        if format is None and isinstance(self.data, bytes):
            format = "png" if self.data.startswith(b"\x89PNG") else "jpeg" if self.data.startswith(b"\xff\xd8") else None
        self.format = "jpeg" if format == "jpg" else format

    def _repr_png_(self):
        return self.data if self.embed and self.format == "png" else None

    def _repr_jpeg_(self):
        return self.data if self.embed and self.format == "jpeg" else None

    def _repr_html_(self):
        return None if self.embed else '<img src="%s"/>' % self.url


class FileLink:
    """A link to a file: its path, as text."""

    def __init__(self, path, url_prefix="", result_html_prefix="", result_html_suffix="<br>"):
        self.path = os.fspath(path)

    def __repr__(self):
        return os.path.abspath(self.path)


for _cls in (DisplayObject, TextDisplayObject, Markdown, HTML, Latex, Math, Pretty, SVG, Javascript, JSON, Image,
             FileLink):
    _cls.__module__ = "IPython.core.display"


def display_mimetype(mimetype):
    def show_as(*objs, raw=False, metadata=None):
        if raw:
            for obj in objs:
                publish_display_data({mimetype: obj})
        else:
            display(*objs, include=[mimetype])
    show_as.__name__ = "display_" + mimetype.split("/")[1].split("+")[0]
    return show_as


def set_matplotlib_formats(*formats, **kwargs):
    """Does nothing: terp saves figures as PNG."""


DISPLAY_API = dict(
    display=display, update_display=update_display, clear_output=clear_output,
    publish_display_data=publish_display_data, DisplayHandle=DisplayHandle, DisplayObject=DisplayObject,
    TextDisplayObject=TextDisplayObject, Markdown=Markdown, HTML=HTML, Latex=Latex, Math=Math, Pretty=Pretty,
    SVG=SVG, Javascript=Javascript, JSON=JSON, Image=Image, FileLink=FileLink,
    set_matplotlib_formats=set_matplotlib_formats,
    display_pretty=display_mimetype("text/plain"), display_html=display_mimetype("text/html"),
    display_markdown=display_mimetype("text/markdown"), display_svg=display_mimetype("image/svg+xml"),
    display_png=display_mimetype("image/png"), display_jpeg=display_mimetype("image/jpeg"),
    display_latex=display_mimetype("text/latex"), display_json=display_mimetype("application/json"),
    display_javascript=display_mimetype("application/javascript"),
)


def register_magic(kind):
    def decorator(func=None, *, name=None):
        def register(f):
            terp.get_ipython().register_magic_function(f, kind, name or f.__name__)
            return f
        if isinstance(func, str):  # @register_line_magic("name")
            name = func
            return register
        return register(func) if func is not None else register
    decorator.__name__ = "register_%s_magic" % kind
    return decorator


# terp's stand-in for IPython, served only when there is no IPython
# (worker.py's IPythonShim), and the modules of ChatGPT's own sandbox.
SHIM_PACKAGES = {"IPython", "IPython.core"}
SHIMS = {
    "IPython": lambda: dict(get_ipython=terp.get_ipython, display=display, __version__="0.0.0+terp",
                            version_info=(0, 0, 0, "terp"),
                            __doc__="terp's stand-in for IPython: get_ipython and IPython.display."),
    "IPython.display": lambda: dict(DISPLAY_API),
    "IPython.core": lambda: {},
    "IPython.core.display": lambda: dict(DISPLAY_API),
    "IPython.core.display_functions": lambda: {k: DISPLAY_API[k] for k in (
        "display", "update_display", "clear_output", "publish_display_data", "DisplayHandle")},
    "IPython.core.getipython": lambda: dict(get_ipython=terp.get_ipython),
    # matplotlib looks here when it finds a shell.
    "IPython.core.pylabtools": lambda: dict(backend2gui={}),
    "IPython.core.magic": lambda: dict(register_line_magic=register_magic("line"),
                                       register_cell_magic=register_magic("cell"),
                                       register_line_cell_magic=register_magic("line_cell")),
    "ace_tools": lambda: dict(display_dataframe_to_user=display_dataframe_to_user),
    "caas_jupyter_tools": lambda: dict(display_dataframe_to_user=display_dataframe_to_user),
}


def shim_spec(name, loader):
    if name not in SHIMS:
        return None
    return importlib.machinery.ModuleSpec(name, loader, is_package=name in SHIM_PACKAGES)


def exec_shim(module):
    module.__dict__.update(SHIMS[module.__name__]())
    module.__terp_shim__ = True


# --- ace_tools -----------------------------------------------------------------

PREVIEW_ROWS = 10


def display_dataframe_to_user(name, dataframe):
    """Shows a table to the user, as ChatGPT's sandbox does: prints its name,
    shape and first rows, and saves the whole table as /work/<name>.csv (a
    file name made safe). A file is never overwritten: a second table of the
    same name (or a file the user uploaded) gets the next free name,
    <name>-2.csv. Takes anything pandas.DataFrame() takes."""
    import pandas as pd

    df = dataframe if isinstance(dataframe, pd.DataFrame) else pd.DataFrame(dataframe)
    stem = re.sub(r"[^\w.-]+", "_", str(name), flags=re.ASCII).strip("._-")[:100] or "table"
    if stem.lower().endswith(".csv"):
        stem = stem[:-4] or "table"
    index = not (isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.step == 1
                 and df.index.name is None)
    for n in range(1, 10000):
        path = os.path.join(terp.work_dir, "%s.csv" % stem if n == 1 else "%s-%d.csv" % (stem, n))
        try:
            f = open(path, "x", encoding="utf-8", newline="")
        except FileExistsError:
            continue
        with f:
            df.to_csv(f, index=index)
        break
    rows, cols = df.shape
    preview = df.head(PREVIEW_ROWS).to_string(max_cols=20, max_colwidth=50)
    print("%s: %d rows \xd7 %d columns, saved as %s" % (name, rows, cols, path))
    print(terp.cut_repr(preview))
    if rows > PREVIEW_ROWS:
        print("[first %d of %d rows]" % (PREVIEW_ROWS, rows))
