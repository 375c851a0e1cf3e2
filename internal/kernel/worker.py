r"""terp's persistent Python worker: runs the model's code like notebook cells.

terp (internal/kernel) writes this file to /work/.terp/worker.py, starts it
with `python3 /work/.terp/worker.py --nonce N --prewarm numpy,pandas,...`
(or `--fresh`) and keeps it for the whole conversation. It uses the standard
library only.

File descriptors. The process starts with terp's pipes on fd 0, 1 and 2. The
first thing the worker does is move them to private descriptors numbered 200
and up (F_DUPFD_CLOEXEC: non-inheritable, as os.dup makes them, PEP 446, so no
subprocess gets them) and point fd 0, 1 and 2 at /dev/null:

  - requests are read from the private copy of the original stdin, so
    input() and sys.stdin see EOF and can never eat a request;
  - frames are written to the private copy of the original stdout, so
    nothing the code prints can reach the protocol channel;
  - the worker's own diagnostics (and faulthandler's report of a crash) go to
    the private copy of the original stderr.

In kernel mode fd 1 and 2 are pipes for the worker's life (Output), so
everything written there (print, os.write, C extensions, subprocesses that
inherit them) is read back by two threads and forwarded as frames of the
run in progress; at the run's end, once the run's processes are gone, the
main thread sends what is left in the pipes itself. In fresh mode each
run's child gets fresh pipes, read by threads that end at EOF.

Protocol (see protocol.go for the full contract). A request is one JSON line,
{"nonce": "<hex>", "code": "<python source>"}. Every response is a frame: a
header line "TERP <nonce> <kind> <n>\n" followed by exactly n raw bytes. Kinds
are ready (JSON, once, carrying the nonce given on the command line), out and
err (raw chunks of the run's fd 1 and fd 2, at most 64 KiB each) and done
(JSON, the last frame of a run). A run's frames carry its request's nonce.

Fresh mode (--fresh: terp's script mode). The worker runs no code of the
model's itself: for each request it writes the code to /work/.terp/main.py,
compiles it, and forks a child that runs it as the main program of a clean
interpreter (FreshWorker), with the run's pipes on fd 1 and 2, then sends the
child's exit status in done, with what the child reported on a pipe of its
own as it ended: the exception that ended it and the images display()
saved. SIGINT kills the child at once. There is no figure saving and no
value shown: a run is `python3 main.py`, minus the interpreter's and the
sandbox's start, and minus the import of the --prewarm modules, which this
process makes once and hands to each child as the code imports them
(Preload). The notebook layer works
there too: a cell's IPython syntax is made Python in this process, before
the fork, and the child gets the builtins; nothing a child does reaches
this process, so no run leaves anything for the next.

The notebook layer. The code is written for a Jupyter notebook: IPython's
`!cmd`, `%magic` and `%%magic` syntax, display() and get_ipython(). That
layer lives in notebook.py, which terp writes next to this file; this file
only hooks it in, so that a cell that uses none of it pays nothing. Its
source is read into memory at start (code that overwrites the file changes
nothing) and compiled only on first use (Notebook): when a cell does not
compile, to turn its IPython syntax into Python (compile first: plain code
compiles as before, and IPython's syntax is never valid Python), when the
code calls display() or uses get_ipython()'s shell (both builtins), when a
trailing value is more than a plain builtin type, and when the code imports
IPython (the real one, patched as it is imported, or terp's stand-in when
there is none) or ace_tools. This file runs alone too (`--repair`), so it
never needs notebook.py to start.

Prewarm. The modules named by --prewarm are imported in a thread of their
own, and the ready frame does not wait for them: a run that imports nothing
beyond the standard library never pays for them, and one that imports more
(or sys, importlib, multiprocessing or concurrent: WAITING_STDLIB) waits for
them to end; in fresh mode (Preload), only for those it imports.
Between runs the thread imports only while the machine has idle
cores (IdleCoreGate).

Signals. SIGINT is ignored except while the code runs, when it raises
KeyboardInterrupt; terp sends it on a timeout. The worker is a child
subreaper, so daemons the code double-forks are reparented to it, and after
every run it kills all its descendants: nothing outlives its run.

Forks. A child the code forks runs the rest of the cell and would then come
back into this file's code, as a second worker on the same channel: its done
frame would end the cell early and it could take the next request. So only
the process that started as the worker answers for a cell: in a child
os.fork points the channel's descriptors at /dev/null (an at-fork hook), and
wherever control comes back from the code (after the cell, in the request
loop, at exit) a child is made to exit at once with os._exit.
"""

import atexit
import builtins
import faulthandler
import fcntl
import functools
import gc
import importlib
import importlib.machinery
import io
import json
import linecache
import os
import re
import select
import signal
import site
import stat
import sys
import threading
import time
import types
import warnings

# ast, tokenize and traceback (and importlib.abc, which imports
# importlib.resources) cost tens of milliseconds at start-up, which a
# fresh-mode worker never needs: they are imported where they are used, and
# by a kernel in main().

WORK_DIR = "/work"
CHUNK = 64 << 10  # largest out/err frame payload
MAX_REPR = 20000  # characters of a trailing expression's repr shown
READER_JOIN_SECONDS = 2.0  # wait for a run's output after its processes died
OUTPUT_DELAY = 0.002  # seconds the first output after a quiet spell waits (Output)
OUTPUT_PIPE = 256 << 10  # bytes the code's output pipe holds (Output)
OUTPUT_BATCH = 0.0002  # seconds Output waits after a small read while output flows (Output.forward)
READER_BACKLOG = 4 << 20  # bytes of it forwarded, at most, while waiting (join_readers)
TRACEBACK_LIMIT = 16 << 10  # characters of a traceback the done frame carries
REPORT_LIMIT = 512 << 10  # bytes of a fresh-mode child's report read (read_report)
BACKEND = "_terp_mpl_backend"  # matplotlib backend module, see hook_matplotlib
PR_SET_CHILD_SUBREAPER = 36
PRIVATE_FDS = 200  # the worker's own descriptors are numbered from here
PREWARM_THREAD = "terp-prewarm"  # the thread that makes the prewarm imports
FONT_SEED_ENV = "TERP_FONTLIST"  # the backend's matplotlib font cache (seed_font_cache)
NOTEBOOK_FILE = os.path.join(WORK_DIR, ".terp", "notebook.py")  # the notebook layer
NOTEBOOK_MODULE = "_terp_notebook"  # its name in sys.modules once loaded
NOTEBOOK_CACHE = os.path.join(WORK_DIR, ".terp", "notebook.cache")  # its compiled code
TERP_MODULES = {NOTEBOOK_MODULE, BACKEND}  # terp's own modules, never preloaded ones

# Where the packages a run installs go: the user site under PYTHONUSERBASE,
# which terp sets to the conversation's package directory (internal/egress
# UserBase), so that they survive steps and pauses like files.
USER_SITE = site.getusersitepackages()

# Values of these types are shown as their repr without the notebook layer,
# which shows anything else as Jupyter would (a Figure as an image).
PLAIN_VALUES = frozenset({int, float, str, bytes, bool, list, tuple, dict, set})

# Frames of terp's own files are dropped from tracebacks shown to the model.
WORKER_FILE = sys._getframe().f_code.co_filename
TERP_FILES = frozenset({WORKER_FILE, NOTEBOOK_FILE})


class Channel:
    """The protocol channel: frames written whole, one at a time.

    The main thread and the two reader threads all send, so a lock keeps
    frames from interleaving; the loop handles the partial writes a signal
    can cause.

    Only the frames of the open run are sent: terp takes any other frame
    for one the code wrote into the channel. A reader thread that outlives
    its run (the code kept a copy of the run's fd 1) would otherwise send
    frames of a run that is over, so those are dropped here.
    """

    def __init__(self, fd, log):
        self.fd = fd
        self.log = log
        self.lock = threading.Lock()
        self.open = None  # the nonce of the run whose frames may be sent
        self.dropped = set()  # runs whose late output was dropped, logged once
        self.severed = False  # set in a forked child, which must send nothing
        self.forwarded = 0  # bytes of output sent, for Worker.join_readers
        self.between = False  # output between runs was dropped, and logged

    def begin(self, nonce):
        with self.lock:
            self.open = nonce
            self.between = False

    def send(self, nonce, kind, payload, last=False):
        """Sends a frame of the open run; last closes the run, so that no
        frame with its nonce follows."""
        if self.severed:
            # Not even the lock: a thread of the parent may have held it at
            # the fork, and in the child nobody will release it.
            return
        header = b"TERP %s %s %d\n" % (nonce.encode(), kind.encode(), len(payload))
        with self.lock:
            if nonce != self.open:
                if nonce not in self.dropped:
                    self.dropped.add(nonce)
                    self.log("dropped %s output that came after its run's end" % kind)
                return
            if last:
                self.open = None
            # Header and payload in one call, without copying the payload
            # behind the header.
            n = os.writev(self.fd, (header, payload))
            if n < len(header) + len(payload):  # a signal cut it short
                data = memoryview(header + payload)[n:]
                while data:
                    data = data[os.write(self.fd, data):]
            self.forwarded += len(payload)

    def send_open(self, kind, payload):
        """Sends output as a frame of the open run; between runs it is
        dropped, and said so once."""
        with self.lock:
            nonce = self.open
        if nonce is None:
            if not self.between:
                self.between = True
                self.log("dropped %s output written between runs" % kind)
            return
        self.send(nonce, kind, payload)

    def send_last(self, nonce, kind, obj):
        """Sends the last frame of a run (done) or of the start-up (ready)."""
        self.send(nonce, kind, json.dumps(obj).encode(), last=True)

    def send_warm(self, nonce):
        """Sends the warm frame, with the start-up's nonce, whenever the
        prewarm imports end: between runs or during one, as they run in a
        thread of their own. Only the worker sends it, once, after ready."""
        if self.severed:
            return
        with self.lock:
            data = b"TERP %s warm 2\n{}" % nonce.encode()
            while data:
                data = data[os.write(self.fd, data):]

    def sever(self, devnull):
        """Cuts a forked child off the channel: its copy of the descriptor
        points at /dev/null, so a frame some path of this file's code sends
        from the child never reaches terp."""
        self.severed = True
        os.dup2(devnull, self.fd, inheritable=False)


class Output:
    """One of a kernel's output streams: a pipe on fd 1 or fd 2 for the
    worker's life, and a thread that forwards what arrives in it as the open
    run's frames.

    Both are kept from run to run. Making two pipes and starting two threads
    for each run, and waiting at its end for the threads to see EOF, cost a
    plain cell (print(1)) most of its time. Instead the run's end drains the
    pipe itself (drain): the thread reads and sends under a lock, so once
    the main thread holds the lock and finds the pipe empty, everything
    written before has been sent, and no thread has to wake.

    Output written between runs (by a thread the code left running) is
    dropped, as before it went to /dev/null; a thread that prints on goes
    into the next run's output, as in Jupyter. Fresh mode makes pipes and
    threads for each run instead: it forks the run's process, and a process
    forked while other threads live inherits only the forking one, with
    whatever locks the others held.
    """

    def __init__(self, fd, kind, chan, log):
        self.fd = fd
        self.kind = kind
        self.chan = chan
        self.log = log
        self.lock = threading.Lock()
        r, w = os.pipe()
        os.set_blocking(r, False)
        # A pipe that holds more lets output that keeps coming be read in
        # larger pieces (forward). A user's pipes may hold 64 MiB in all
        # (pipe-user-pages-soft) before new ones get the least buffer: 256 KiB
        # each leaves room for a hundred kernels of one uid.
        try:
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, OUTPUT_PIPE)
            self.batch = OUTPUT_BATCH
        except OSError:
            self.batch = 0
        self.read_fd = private_fd(r, close=True)
        self.pipe = os.fstat(self.read_fd).st_ino  # both ends share it
        # No copy of the write end is kept: fd is the only one, which the
        # code cannot find among the worker's descriptors to write into.
        os.dup2(w, fd)
        os.close(w)
        self.eof = False
        self.thread = threading.Thread(target=self.forward, name="terp-" + kind, daemon=True)
        self.thread.start()

    def attached(self):
        """Whether fd is still this pipe: the code may have closed it or
        pointed it elsewhere. One fstat."""
        try:
            return os.fstat(self.fd).st_ino == self.pipe
        except OSError:
            return False

    def forward(self):
        poller = select.poll()
        poller.register(self.read_fd, select.POLLIN)
        last = 0.0  # when output last came
        try:
            while not self.eof:
                poller.poll()
                if time.monotonic() - last > OUTPUT_DELAY:
                    # The first output after a quiet spell waits a little:
                    # a short run (print(1)) ends meanwhile and sends it
                    # itself (drain), and this thread, which needs the GIL
                    # the code holds, does not slow it down. Output that
                    # keeps coming is sent as it gathers (below).
                    time.sleep(OUTPUT_DELAY)
                with self.lock:
                    sent = self.pump(READER_BACKLOG)
                if sent:
                    last = time.monotonic()
                    if sent < OUTPUT_PIPE // 2 and self.batch:
                        # Output that keeps coming in small writes (a
                        # line-buffered print each) is left to gather a
                        # moment: a read and a frame per line would take
                        # the GIL from the code at every line, which
                        # slowed printing 512 MiB to twice a bare pipe's
                        # time (docs/benchmarks.md).
                        time.sleep(self.batch)
        except OSError as e:  # the code closed the descriptor
            self.log("forwarding %s: %s" % (self.kind, e))
        # At EOF (the code closed fd and nothing else holds the pipe) the
        # next run makes a new one.

    def pump(self, limit):
        """Sends what the pipe holds as frames, until it is empty or limit
        bytes were sent, and returns how many were; called with the lock."""
        sent = 0
        while sent < limit and not self.eof:
            try:
                data = os.read(self.read_fd, CHUNK)
            except BlockingIOError:
                break
            if not data:
                self.eof = True
                break
            self.chan.send_open(self.kind, data)
            sent += len(data)
        return sent

    def drain(self):
        """Sends what the run left in the pipe, but no more than
        READER_BACKLOG bytes: what still comes after that comes from
        something the run left writing (a thread of the code's), not from
        the run's backlog."""
        with self.lock:
            if self.pump(READER_BACKLOG) >= READER_BACKLOG:
                self.log("output still arriving at the end of run %s" % self.chan.open)

    def alive(self):
        return self.thread.is_alive()


class Worker:
    """The session: the model's namespace and the runs made in it."""

    def __init__(self, chan, diag, devnull):
        self.chan = chan
        self.diag = diag
        self.devnull = devnull
        self.std = StdStreams()
        self.cell = 0
        self.figures = []  # saved during the current run
        self.value = None  # the repr the current run's last expression showed
        self.value_apart = False  # --value-apart: the value is not printed
        self.exception = None  # what ended the current run's code (exception_report)
        self.sigint = False  # a SIGINT arrived during the current run
        self.pid = os.getpid()  # the worker's; any other is a forked child's
        self.forked = False  # set in a child by os.fork's at-fork hook
        self.running = threading.Event()  # set while a run is in progress
        # Set when the prewarm imports are over (None: there are none). An
        # Event, not Thread.join: a join a KeyboardInterrupt cut short leaves
        # the thread looking finished in Python 3.11, and the next cell would
        # not wait.
        self.prewarmed = None
        # The start-up's nonce once the ready frame is sent, for the warm
        # frame; the lock orders the two, as the imports may end first.
        self.start_nonce = None
        self.warm_due = False
        self.warm_lock = threading.Lock()
        self.notebook = None  # the notebook layer (Notebook), set in main
        self.outputs = []  # the Output on fd 1 and fd 2, made by the first run
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        # Replacing the module makes pickle, `if __name__ == "__main__"` and
        # multiprocessing see the model's namespace, not this file's.
        sys.modules["__main__"] = main
        self.ns = main.__dict__

    def started(self, nonce):
        """Called once the ready frame is sent: a warm frame the imports
        owed goes now."""
        with self.warm_lock:
            self.start_nonce = nonce
            if self.warm_due:
                self.chan.send_warm(nonce)

    def tell_warm(self):
        """Tells terp the prewarm imports are over (the warm frame), once
        the ready frame is out: terp counts a sandbox made ahead as warm
        from then on. Never from a forked child."""
        if os.getpid() != self.pid:
            return
        with self.warm_lock:
            self.warm_due = True
            if self.start_nonce is not None:
                self.chan.send_warm(self.start_nonce)

    def log(self, msg):
        try:
            self.diag.write("terp worker: %s\n" % msg)
        except Exception:
            pass

    # --- one run ---------------------------------------------------------

    def run(self, nonce, code):
        self.cell += 1
        self.figures = []
        self.value = None
        self.exception = None
        self.sigint = False
        started = time.monotonic()
        self.running.set()
        self.chan.begin(nonce)
        self.attach_outputs()
        self.std.bind()
        add_user_site()
        # A mask the last run left would keep this one from being interrupted.
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        exit_code = self.execute(code, "<cell %d>" % self.cell)
        self.exit_if_forked(exit_code)
        self.std.flush()
        try:
            self.save_open_figures()
        except BaseException as e:  # noqa: BLE001 - never let the worker die here
            write_quietly(self.std.stderr, "terp: could not save the open figures: %s\n" % e)
        self.std.flush()
        kill_descendants(self.log)
        for out in self.outputs:
            out.drain()
        self.running.clear()
        self.chan.send_last(nonce, "done", {
            "exit_code": exit_code,
            "interrupted": self.sigint,
            "figures": self.figures,
            "value": self.value,
            "exception": bounded_exception(self.exception),
            "cell": self.cell,
            "seconds": round(time.monotonic() - started, 6),
        })

    def attach_outputs(self):
        """Makes fd 1 and fd 2 the pipes of this worker's Outputs: at the
        first run, and again when the code closed one or its thread ended."""
        for i, (fd, kind) in enumerate(((1, "out"), (2, "err"))):
            if i == len(self.outputs):
                self.outputs.append(Output(fd, kind, self.chan, self.log))
            elif not (self.outputs[i].alive() and self.outputs[i].attached()):
                # The old one's thread ends at its pipe's EOF, or forwards
                # what a copy of its fd the code kept writes.
                self.outputs[i] = Output(fd, kind, self.chan, self.log)

    def join_readers(self, readers):
        """Waits for a run's output readers to reach EOF: as long as they
        forward what the run left in its pipes, which takes as long as terp
        takes to read it (a consumer that must get every byte holds terp
        back), but no longer than READER_JOIN_SECONDS without a frame sent,
        nor for more than READER_BACKLOG bytes: a reader that still runs
        after that reads a descriptor something else holds (a thread of the
        code's with a dup of fd 1), not the run's backlog."""
        for t in readers:
            start = self.chan.forwarded
            while True:
                before = self.chan.forwarded
                t.join(READER_JOIN_SECONDS)
                if not t.is_alive():
                    break
                if self.chan.forwarded == before or self.chan.forwarded - start > READER_BACKLOG:
                    # What it forwards from now is dropped, since the run
                    # is closed with done.
                    self.log("output reader of run %d still running" % self.cell)
                    break

    def exit_if_forked(self, code):
        """Ends a forked child that came back into this file's code, with
        the exit status the cell would give it, before it can send a frame
        or read a request.

        A child os.fork made holds only what it printed itself in its std
        streams (the parent's were flushed just before the fork), so those
        are flushed; nothing else it inherited is, as with os._exit after a
        fork in C. A child of a bare fork(2) (ctypes) inherited the parent's
        buffers, which are dropped rather than printed twice.
        """
        if not self.forked and os.getpid() == self.pid:
            return
        if self.forked:
            self.std.flush()
        os._exit(code)

    def forward(self, fd, nonce, kind):
        try:
            while True:
                data = os.read(fd, CHUNK)
                if not data:
                    break
                self.chan.send(nonce, kind, data)
        except OSError as e:
            self.log("forwarding %s: %s" % (kind, e))
        finally:
            os.close(fd)

    def on_sigint(self, signum, frame):
        self.sigint = True
        raise KeyboardInterrupt

    def execute(self, code, filename):
        """Runs one cell and returns its exit code, like `python3 file`."""
        # Registered for tracebacks: functions defined here may fail later.
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        try:
            body, last, imports = self.notebook.compile(lambda c: compile_cell(c, filename, code), code)
        except Exception as e:  # SyntaxError, null bytes, too deeply nested
            self.exception = print_exception(e, only=True)
            return 1
        try:
            signal.signal(signal.SIGINT, self.on_sigint)
            try:
                if imports:
                    self.await_prewarm()
                COLLECTOR.release()
                exec(body, self.ns)
                if last is not None:
                    value = eval(last, self.ns)
                    if value is not None:
                        self.value = self.show(value)
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
        except SystemExit as e:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            status = exit_status(e.code)
            if status:
                self.exception = exit_report(e)
            return status
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt too
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.exception = print_exception(e)
            return 1
        return 0

    def await_prewarm(self):
        """Waits for the prewarm imports to end. Modules half imported by the
        prewarm thread are in sys.modules, where code that looks there
        (matplotlib.use does) takes them for imported: code that imports
        more than the standard library (which imports none of them) waits
        for the prewarm, at full speed during a run."""
        if self.prewarmed is not None:
            self.prewarmed.wait()

    def show(self, value):
        """Shows a cell's last value, as Jupyter would, and returns the text
        shown. A plain builtin type is its repr; anything else goes through
        the notebook layer's formatter, which knows display hooks
        (_repr_markdown_ and the like) and saves a Figure as an image. With
        --value-apart (a front-end that shows the value apart, as Jupyter's
        execute_result) nothing is printed: the text is only returned."""
        stream = io.StringIO() if self.value_apart else None
        if type(value) in PLAIN_VALUES:
            return show_value(value, stream)
        return self.notebook.load().show_value(value, stream)

    # --- figures -----------------------------------------------------------

    def save_open_figures(self):
        """Saves every open pyplot figure as /work/figure_N.png and closes it.

        It is the backend's show() and also runs after every run, so figures
        reach the model whether the code calls plt.show() or not.
        """
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None or (self.prewarmed is not None and not self.prewarmed.is_set()):
            # While the prewarm imports go on pyplot may be half imported,
            # and the code has no figures: it has not imported pyplot.
            return
        from matplotlib import _pylab_helpers

        for num in plt.get_fignums():
            manager = _pylab_helpers.Gcf.get_fig_manager(num)
            if manager is None:
                continue
            fig = manager.canvas.figure
            if getattr(fig, "_terp_saved", False) and not fig.stale:
                # The code saved it itself and has not changed it since.
                plt.close(fig)
                continue
            try:
                self.figures.append(save_figure(fig))
            except Exception as e:  # noqa: BLE001
                sys.stderr.write("terp: could not save figure %s: %s\n" % (num, e))
            finally:
                plt.close(fig)


class FreshWorker(Worker):
    """Fresh mode (--fresh, terp's script mode): every run is a new Python
    program, as `python3 /work/.terp/main.py` would run it, but forked from
    this process instead of started, which spares each run the interpreter's
    start and the sandbox's. Only files survive between runs: this process
    runs no code of the model's, so each child starts from the same clean
    interpreter, with a new __main__, no figures saved for it and no value
    shown. On SIGINT (terp's timeout) the child and all it started are
    killed at once; this process lives on for the next run.
    """

    def __init__(self, chan, diag, devnull):
        super().__init__(chan, diag, devnull)
        self.child = 0  # the running child's pid
        self.preload = None  # the modules imported ahead of the runs (Preload)

    def run(self, nonce, code):
        self.cell += 1
        self.sigint = False
        started = time.monotonic()
        self.chan.begin(nonce)
        write_script(code, self.log)
        if not self.await_preload(code):
            # terp's timeout came while the run waited: there is no child
            # to kill, and nothing ran.
            self.chan.send_last(nonce, "done", {
                "exit_code": 130, "interrupted": True, "figures": [], "value": None, "exception": None,
                "cell": self.cell, "seconds": round(time.monotonic() - started, 6)})
            return
        try:
            # Compiled here, not in the child: a first compile in a new
            # process costs milliseconds, in this one microseconds. The
            # notebook layer's transform, pure, runs here too.
            compiled = self.notebook.compile(lambda c: compile(c, SCRIPT, "exec", dont_inherit=True), code)
        except Exception as e:  # SyntaxError, null bytes, too deeply nested
            compiled = e
        pipes = (os.pipe(), os.pipe())
        # The child's report: the exception that ended it and the images it
        # saved, which this process cannot see (read_report).
        report_r, report_w = os.pipe()
        # Forked before the reader threads start: the child of a process
        # with threads inherits only the forking one, and Python 3.12 warns
        # of it. The preload thread's IdleCoreGate waits holding the import
        # lock that os.fork takes: it lets go while running is set. Unlike a
        # kernel's cell, the run never waits for the preload once forked, so
        # running is cleared again at once: on a busy machine the imports
        # would take their CPU from the run (from the steps of a model that
        # answers at once: benchmark against the seed's loop, docs).
        self.running.set()
        pid = os.fork()
        self.running.clear()
        if pid == 0:
            COLLECTOR.release()
            if self.preload is not None:
                self.preload.enter_child()
            for fd, (r, w) in zip((1, 2), pipes):
                os.dup2(w, fd)
                os.close(w)
                os.close(r)
            os.close(report_r)
            os._exit(self.run_script(compiled, private_fd(report_w, close=True)))
        self.child = pid
        readers = []
        for (r, w), kind in zip(pipes, ("out", "err")):
            os.close(w)
            t = threading.Thread(target=self.forward, args=(r, nonce, kind), daemon=True)
            t.start()
            readers.append(t)
        os.close(report_w)
        report = []
        t = threading.Thread(target=read_report, args=(report_r, report, self.log), daemon=True)
        t.start()
        readers.append(t)
        signal.signal(signal.SIGINT, self.on_sigint)
        try:
            _, status = os.waitpid(pid, 0)  # retried after the handler, PEP 475
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.child = 0
        kill_descendants(self.log)
        self.join_readers(readers)
        exception, figures = child_report(report, self.log)
        done = {"exit_code": exit_code_of(status), "interrupted": self.sigint, "figures": figures,
                "value": None, "exception": exception, "cell": self.cell,
                "seconds": round(time.monotonic() - started, 6)}
        if os.WIFSIGNALED(status):
            done["signal"] = os.WTERMSIG(status)
            done["exception"] = None  # what the child said before it was killed, if anything
        self.chan.send_last(nonce, "done", done)

    def await_preload(self, code):
        """Waits for the preload of the modules the code imports beyond
        the standard library (all of it if the code imports one that is not
        preloaded), and returns False if terp's SIGINT (a timeout) came
        first. A child forked before the preload ended gets what was
        imported whole by then (Preload.enter_child): so the first step of
        a pandas analysis need not wait for matplotlib. Code that imports
        only the standard library does not wait at all, so a preload never
        holds a plain run up."""
        if self.preload is None or self.preload.done.is_set():
            return True
        # Set before the parse imports ast, whose module lock the preload
        # thread may hold while the IdleCoreGate holds it back: now it does not.
        self.running.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            tops = imports_beyond_stdlib(code)
            if tops != set():
                self.preload.wait_for(tops)
            return True
        except KeyboardInterrupt:
            self.sigint = True
            return False
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.running.clear()

    def on_sigint(self, signum, frame):
        self.sigint = True
        if self.child:
            try:
                os.kill(self.child, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def run_script(self, compiled, report_fd):
        """Runs the compiled code (or raises the exception compiling it
        raised) in the forked child as the main program, and returns its
        exit status, after what the interpreter does at exit. Then it
        writes its report (send_report) to report_fd."""
        me = os.getpid()
        exception = None
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.std.bind()
        # A crash of the code is reported where its output goes.
        faulthandler.enable(file=self.std.stderr)
        main = types.ModuleType("__main__")
        main.__dict__.update(__builtins__=builtins, __file__=SCRIPT, __cached__=None)
        sys.modules["__main__"] = main
        self.ns = main.__dict__
        sys.argv = [SCRIPT]
        self.notebook.install_builtins()
        add_user_site()
        try:
            if isinstance(compiled, BaseException):
                raise compiled
            exec(compiled, main.__dict__)
            status = 0
        except SystemExit as e:
            status = exit_status(e.code)
            if status:
                exception = exit_report(e)
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt too
            if is_usage_error(e):
                write_quietly(sys.stderr, usage_error_text(e))
                status = 1
            else:
                tb = without_terp_frames(e.__traceback__)
                e.__traceback__ = tb  # the hook prints the exception's own
                try:
                    sys.excepthook(type(e), e, tb)
                except BaseException:  # noqa: BLE001
                    sys.__excepthook__(type(e), e, tb)
                status = 130 if isinstance(e, KeyboardInterrupt) else 1
            # Described apart from what the hook printed, which may be the
            # code's own hook's.
            exception = exception_report(e)
        # As the interpreter does at exit: wait for the threads the code
        # left running, then run its atexit functions, then flush.
        for step in (getattr(threading, "_shutdown", None), getattr(atexit, "_run_exitfuncs", None)):
            try:
                if step is not None:
                    step()
            except BaseException:  # noqa: BLE001 - a KeyboardInterrupt while waiting
                pass
        self.std.flush()
        if os.getpid() == me:
            # Not from a child the code forked that came back here: the
            # report is the run's.
            send_report(report_fd, {"exception": bounded_exception(exception), "figures": self.figures})
        return status


def send_report(fd, report):
    """Writes a fresh-mode child's report to the worker, as one JSON
    document, and closes fd. A code that closed or replaced fd leaves no
    report: the run's exit status and stderr still tell what happened."""
    try:
        data = memoryview(json.dumps(report).encode())
        while data:
            data = data[os.write(fd, data):]
    except (OSError, ValueError, TypeError):
        pass
    try:
        os.close(fd)
    except OSError:
        pass


def read_report(fd, into, log):
    """Reads a fresh-mode child's report into into, as one bytes object,
    until every process that holds the pipe's write end is gone: the child,
    and any process it forked, which kill_descendants ends.

    A pipe, not a file: the code owns /work, where a file could be replaced
    or a link planted, and a pipe needs no cleaning up; it is read while
    the child runs, so a report larger than the pipe holds never blocks the
    child, and the child's end closes when it dies, however it dies. Beyond
    REPORT_LIMIT bytes, which no report of the child's comes near, what it
    reads is dropped, so that a code that writes into the pipe itself cannot
    make the worker hold more."""
    data, dropped = [], False
    size = 0
    try:
        while True:
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            if size + len(chunk) > REPORT_LIMIT:
                dropped = True
                continue
            size += len(chunk)
            data.append(chunk)
    except OSError as e:
        log("reading the run's report: %s" % e)
    finally:
        os.close(fd)
    if dropped:
        log("dropped a report over %d bytes" % REPORT_LIMIT)
        data = []
    into.append(b"".join(data))


def child_report(report, log):
    """The exception and the figures a fresh-mode child reported (read_report
    put its bytes in report), checked: the child runs the model's code,
    which can write anything into the pipe. Nothing when there is no report."""
    data = report[0] if report else b""
    if not data:
        return None, []
    try:
        got = json.loads(data)
        figures = got["figures"]
        if not isinstance(figures, list) or not all(isinstance(f, str) and FIGURE_NAME.fullmatch(f) for f in figures):
            raise ValueError("figures are not figure file names")
        return bounded_exception(got["exception"]), figures
    except (ValueError, KeyError, TypeError) as e:
        log("a bad report from the run: %s" % e)
        return None, []


# Where a fresh-mode run's code is written before it runs, so that its
# tracebacks show the lines, as with `python3 /work/.terp/main.py`.
SCRIPT = os.path.join(WORK_DIR, ".terp", "main.py")


def write_script(code, log):
    """Writes code to SCRIPT, never through a link the code planted, and
    repairs terp's directory if the code broke it (it owns /work)."""
    for attempt in range(2):
        try:
            if not stat.S_ISDIR(os.lstat(os.path.dirname(SCRIPT)).st_mode):
                raise NotADirectoryError(os.path.dirname(SCRIPT))
            fd = os.open(SCRIPT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            with open(fd, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(code)
            return
        except (OSError, ValueError) as e:
            if attempt:
                # The code runs all the same; its tracebacks lack the lines.
                log("cannot write %s: %s" % (SCRIPT, e))
                return
        try:
            repair_internal_dir([os.path.basename(SCRIPT)])
        except OSError as e:
            log("cannot repair %s: %s" % (os.path.dirname(SCRIPT), e))


def repair_internal_dir(names):
    """Puts /work/.terp back as a directory the code's user can write, down
    to what is in it (matplotlib's cache), removing (never following) a file
    or symlink in its place, and removes a directory or symlink that stands
    where one of the files names goes. It runs inside the sandbox, as the
    code does, so it can do nothing the code could not. terp runs it as
    `python3 - --repair NAME` with this file on stdin when it cannot write
    its own files there (internaldir.go), and a fresh-mode worker when it
    cannot write main.py."""
    import shutil

    d = os.path.dirname(SCRIPT)
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
    for name in names:
        p = os.path.join(d, name)
        if os.path.islink(p):
            os.unlink(p)
        elif os.path.isdir(p):
            shutil.rmtree(p)


def exit_code_of(status):
    """The exit status as a shell gives it: 128+N for a signal N."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status)


def compile_cell(code, filename, source=None):
    """Compiles code as a notebook cell: all but a trailing expression, which
    is compiled apart so its value can be shown, unless a ';' ends it. It
    also says whether the cell imports anything but the standard library.
    source is the cell as written when code is that cell with its IPython
    syntax made Python: a ';' ending what the model wrote hides the value."""
    import ast

    tree = ast.parse(code, filename, "exec")
    # Walking the tree costs as much as parsing a short cell; a cell that
    # never says import imports nothing.
    imports = "import" in code and any(not stdlib_only(node) for node in ast.walk(tree)
                                       if isinstance(node, (ast.Import, ast.ImportFrom)))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not ends_with_semicolon(source or code):
        last = ast.Expression(tree.body.pop().value)
        last = compile(last, filename, "eval", dont_inherit=True)
    return compile(tree, filename, "exec", dont_inherit=True), last, imports


# Standard library packages after whose import a cell waits for the
# prewarm all the same: with sys and importlib the code can reach
# sys.modules, which holds the modules the prewarm thread is half way
# through; multiprocessing and concurrent fork the worker (a process pool),
# and a child forked while the thread holds a module's import lock would
# wait for it forever if it imported that module.
WAITING_STDLIB = {"sys", "importlib", "multiprocessing", "concurrent"}


def stdlib_only(node, waiting=WAITING_STDLIB):
    """Whether an import statement imports only standard library modules
    outside waiting (a relative import does not)."""
    import ast

    if isinstance(node, ast.ImportFrom):
        names = [node.module] if node.level == 0 and node.module else []
    else:
        names = [alias.name for alias in node.names]
    tops = [n.split(".")[0] for n in names]
    return bool(tops) and all(t in sys.stdlib_module_names and t not in waiting for t in tops)


def imports_beyond_stdlib(code):
    """The top-level names of the modules beyond the standard library that
    a script-mode run's code imports, for which it waits for the preload;
    None when they cannot be told (a relative import, or code that is not
    Python yet: IPython's syntax), which waits for all of it. Unlike a
    kernel's cell (see WAITING_STDLIB), importing sys or forking does not
    make it wait: its child never sees the preload's half-imported modules
    (Preload.enter_child)."""
    import ast

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    tops = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not stdlib_only(node, waiting=()):
            if isinstance(node, ast.ImportFrom):
                if node.level or not node.module:
                    return None
                tops.add(node.module.split(".")[0])
            else:
                tops.update(alias.name.split(".")[0] for alias in node.names)
    return tops - set(sys.stdlib_module_names)


def ends_with_semicolon(code):
    if ";" not in code:
        # No need to tokenize, which costs more than compiling a short cell.
        return False
    import tokenize

    skip = {tokenize.ENDMARKER, tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT,
            tokenize.INDENT, tokenize.DEDENT}
    last = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type not in skip:
                last = tok
    except (tokenize.TokenError, SyntaxError):
        return False
    return last is not None and last.type == tokenize.OP and last.string == ";"


def show_value(value, stream=None):
    """Prints the repr of a cell's last expression, as the cell's last
    output (to stream, when given), and returns it (for the done frame: an
    export shows it as the cell's value)."""
    text = cut_repr(repr(value))
    (stream or sys.stdout).write(text + "\n")
    return text


def cut_repr(text):
    """text, cut at MAX_REPR characters, saying so."""
    if len(text) > MAX_REPR:
        text = text[:MAX_REPR] + "\n[... repr cut at %d of %d characters ...]" % (MAX_REPR, len(text))
    return text


def exit_status(code):
    """The exit status Python gives sys.exit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write("%s\n" % (code,))
    except Exception:  # noqa: BLE001
        pass
    return 1


def print_exception(e, only=False):
    """Prints e's traceback without terp's frames, so the model sees its own
    code and the libraries it called, as with `python3 file`, and returns
    the exception as the done frame reports it (exception_report). only
    prints the exception alone, without a traceback: for an error in
    compiling the cell, which has no frame of the code's."""
    report = exception_report(e, only)
    if is_usage_error(e):
        write_quietly(sys.stderr, usage_error_text(e))
    else:
        write_quietly(sys.stderr, "".join(line + "\n" for line in report["traceback"]))
    return report


def exception_report(e, only=False):
    """e as the done frame reports the exception that ended a run
    (protocol.go): its type's name and its value (str) as Jupyter's error
    message has them, and its traceback as the model reads it, one line an
    item: without terp's frames, and for a SyntaxError just the formatted
    error lines. A UsageError of the notebook layer's has none, as IPython
    prints none."""
    import traceback

    name = type(e).__name__
    try:
        value = str(e)
    except BaseException:  # noqa: BLE001 - a broken __str__
        value = "<exception str() failed>"
    if is_usage_error(e):
        return {"name": name, "value": value, "traceback": []}
    try:
        if only:
            text = "".join(traceback.format_exception_only(type(e), e))
        else:
            te = traceback.TracebackException(type(e), e, e.__traceback__, compact=True)
            strip_worker_frames(te, set())
            text = "".join(te.format())
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
    except BaseException:  # noqa: BLE001 - a broken __repr__
        lines = [name]
    return {"name": name, "value": value, "traceback": lines}


def exit_report(e):
    """A SystemExit with a nonzero status as the exception that ended the
    run: it prints no traceback, as Python prints none."""
    try:
        value = str(e)
    except BaseException:  # noqa: BLE001
        value = ""
    return {"name": type(e).__name__, "value": value, "traceback": []}


def bounded_exception(report):
    """report (exception_report's, or what a fresh-mode child sent, which
    may be anything) cut to fit the done frame with room to spare: the value
    and each line at MAX_REPR characters, the traceback at TRACEBACK_LIMIT,
    keeping its head and its tail, which names the exception. None when it
    is not a report."""
    if not isinstance(report, dict):
        return None
    name, value, lines = report.get("name"), report.get("value"), report.get("traceback")
    if not (isinstance(name, str) and isinstance(value, str) and isinstance(lines, list) and
            all(isinstance(line, str) for line in lines)):
        return None
    lines = [cut_line(line) for line in lines]
    if sum(len(line) + 1 for line in lines) > TRACEBACK_LIMIT:
        # The tail first, with three quarters of the room, then the head.
        start, end, size = 0, len(lines), 0
        while end > 0 and size + len(lines[end - 1]) + 1 <= TRACEBACK_LIMIT * 3 // 4:
            end -= 1
            size += len(lines[end]) + 1
        while start < end and size + len(lines[start]) + 1 <= TRACEBACK_LIMIT:
            size += len(lines[start]) + 1
            start += 1
        lines = lines[:start] + ["[... %d lines cut ...]" % (end - start)] + lines[end:]
    return {"name": cut_line(name), "value": cut_line(value), "traceback": lines}


def cut_line(text):
    """text, cut at MAX_REPR characters, saying so on the same line."""
    if len(text) > MAX_REPR:
        text = text[:MAX_REPR] + " [... cut at %d of %d characters ...]" % (MAX_REPR, len(text))
    return text


def strip_worker_frames(te, seen):
    import traceback

    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename not in TERP_FILES])
    strip_worker_frames(te.__cause__, seen)
    strip_worker_frames(te.__context__, seen)
    for sub in getattr(te, "exceptions", None) or ():
        strip_worker_frames(sub, seen)


def without_terp_frames(tb):
    """tb's chain of frames without those of terp's files."""
    head = last = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename not in TERP_FILES:
            if last is None:
                head = tb
            else:
                last.tb_next = tb
            last = tb
        tb = tb.tb_next
    if last is not None:
        last.tb_next = None
    return head


def is_usage_error(e):
    """Whether e is the notebook layer's UsageError: the model misused a
    magic, which IPython reports without a traceback."""
    return getattr(type(e), "terp_usage", False) is True


def usage_error_text(e):
    return "UsageError: %s\n" % (e,)


class StdStreams:
    """The text streams on fd 0, 1 and 2 that sys.stdin, sys.stdout and
    sys.stderr are bound to at the start of every run.

    They wrap the descriptor numbers, not a run's pipes, so a stream the code
    kept (a logging handler made in an earlier run, say) writes into the
    current run. stdout is line-buffered so output arrives as it is printed;
    stderr is unbuffered. A stream the code closed is made anew.
    """

    def __init__(self):
        self.stdin = self.stdout = self.stderr = None

    def bind(self):
        if self.stdin is None or self.stdin.closed:
            # exit() and quit() close sys.stdin.
            self.stdin = open(0, "r", closefd=False)
        if self.stdout is None or self.stdout.closed:
            self.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
                                           encoding="utf-8", errors="backslashreplace",
                                           line_buffering=True)
        if self.stderr is None or self.stderr.closed:
            self.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
                                           encoding="utf-8", errors="backslashreplace",
                                           line_buffering=True, write_through=True)
        sys.stdin = sys.__stdin__ = self.stdin
        sys.stdout = sys.__stdout__ = self.stdout
        sys.stderr = sys.__stderr__ = self.stderr

    def flush(self):
        flush(self.stdout, self.stderr, sys.stdout, sys.stderr)

    def flush_own(self):
        """Flushes the streams made here, not whatever the code put in
        sys.stdout, whose flush may do anything (fork again, say)."""
        flush(self.stdout, self.stderr)


def write_quietly(stream, text):
    try:
        stream.write(text)
    except BaseException:  # noqa: BLE001
        pass


def flush(*streams):
    for s in streams:
        try:
            s.flush()
        except BaseException:  # noqa: BLE001 - closed, or replaced by the code
            pass


FIGURE_NAME = re.compile(r"figure_(\d+)\.(?:png|jpg)$")


def save_figure(fig):
    """Saves fig as the next free /work/figure_N.png."""
    return save_image(lambda f: fig.savefig(f, format="png"), "png")


def save_image(write, ext):
    """Saves an image as the next free /work/figure_N.<ext>, written by
    write(file), never overwriting a file, so a restarted worker continues
    the numbering. PNG and JPEG files share it: the images display() saves
    are numbered with the figures."""
    n = 1
    for name in os.listdir(WORK_DIR):
        m = FIGURE_NAME.match(name)
        if m:
            n = max(n, int(m.group(1)) + 1)
    while True:
        name = "figure_%d.%s" % (n, ext)
        path = os.path.join(WORK_DIR, name)
        try:
            f = open(path, "xb")
        except FileExistsError:
            n += 1
            continue
        try:
            with f:
                write(f)
        except BaseException:
            os.unlink(path)
            raise
        return name


# --- processes -----------------------------------------------------------------


def become_subreaper(log):
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            log("prctl(PR_SET_CHILD_SUBREAPER): errno %d" % ctypes.get_errno())
    except Exception as e:  # noqa: BLE001
        log("cannot become a subreaper: %s" % e)


def descendants(root):
    """Returns [(pid, state)] of root's descendants, from /proc's ppids."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) < 2:
            continue
        children.setdefault(int(fields[1]), []).append((int(name), fields[0]))
    found, todo = [], [root]
    while todo:
        for pid, state in children.get(todo.pop(), ()):
            found.append((pid, state))
            todo.append(pid)
    return found


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_descendants(log):
    """Kills every process the run started, however it detached itself.

    A run that started none costs one waitpid: a process with no children
    has no descendants, since the worker is a subreaper and a process whose
    parent died becomes its child. Scanning /proc costs a tenth of a
    millisecond even in a sandbox's own pid namespace, a third of a plain
    cell's time."""
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return
    me = os.getpid()
    for attempt in range(200):
        procs = descendants(me)
        for pid, state in procs:
            if state != b"Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        reap()
        if not procs:
            return
        if attempt:
            time.sleep(0.01)
    log("processes still alive after the run: %s" % descendants(me))


# --- imports -------------------------------------------------------------------


class ImportHooks:
    """A finder, first on sys.meta_path, that serves terp's own modules and
    runs terp's code right after some modules are imported, without
    importing anything before the code does.

    serve maps a module name to the loader that builds it. after maps one
    to a function called with the module as soon as it is executed, before
    any importer binds its names: matplotlib's are set up that way (see
    hook_matplotlib), and IPython's display and get_ipython are replaced
    with terp's before `from IPython.display import display` can get them.
    """

    def __init__(self):
        self.serve = {}
        self.after = {}
        self.busy = False

    def find_spec(self, name, path, target=None):
        loader = self.serve.get(name)
        if loader is not None:
            return importlib.machinery.ModuleSpec(name, loader)
        after = self.after.get(name)
        if after is None or self.busy:
            return None
        self.busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(name, path, target)
                    if spec is not None:
                        break
        finally:
            self.busy = False
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            exec_module = spec.loader.exec_module

            def exec_then(module):
                try:
                    exec_module(module)
                finally:
                    after(module)

            spec.loader.exec_module = exec_then
        return spec


# --- matplotlib ----------------------------------------------------------------


def hook_matplotlib(hooks, worker):
    """Provides terp's matplotlib backend without a file and without
    importing matplotlib before the code does.

    MPLBACKEND names the module BACKEND, which hooks builds on import. The
    inherited MPLBACKEND is restored once matplotlib has read it, so a
    `python3 plot.py` the code starts in a subprocess gets the usual Agg
    instead of a module it cannot import, and the figures the code saves
    itself are marked once matplotlib.figure is imported (see
    track_savefig).
    """
    inherited = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "module://" + BACKEND

    def restore_backend(module):
        if os.environ.get("MPLBACKEND") == "module://" + BACKEND:
            if inherited is None:
                os.environ.pop("MPLBACKEND", None)
            else:
                os.environ["MPLBACKEND"] = inherited

    hooks.serve[BACKEND] = BackendLoader(worker)
    hooks.after["matplotlib"] = restore_backend
    hooks.after["matplotlib.figure"] = track_savefig


def track_savefig(figure_module):
    """Makes Figure.savefig remember that the code saved the figure itself,
    so that a chart saved with plt.savefig("chart.png") and left open is not
    saved again as figure_N.png. It is done on the Figure, not in terp's
    backend, so it holds whatever backend the code switches to
    (matplotlib.use("Agg") is common in scripts)."""
    cls = getattr(figure_module, "Figure", None)
    savefig = getattr(cls, "savefig", None)
    if savefig is None:  # the import failed
        return

    @functools.wraps(savefig)
    def savefig_and_mark(self, *args, **kwargs):
        result = savefig(self, *args, **kwargs)
        self._terp_saved = True
        # savefig leaves the figure stale, having put back the dpi and
        # colours it saved with, although what it drew is what the figure
        # shows. Clearing the flag lets save_open_figures see a change made
        # after the save: any artist's change marks the figure stale again.
        self.stale = False
        return result

    cls.savefig = savefig_and_mark


class BackendLoader:
    """Builds the backend: Agg for drawing, and a show() that saves."""

    def __init__(self, worker):
        self.worker = worker

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        from matplotlib.backend_bases import FigureManagerBase
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        save = self.worker.save_open_figures

        def show(*args, **kwargs):
            save()

        module.FigureCanvas = FigureCanvasAgg
        module.FigureManager = FigureManagerBase
        module.show = show


# --- packages ------------------------------------------------------------------


def add_user_site():
    """Puts USER_SITE, where %pip installs, on sys.path once it exists,
    before the system's packages as Python's site does at start, so that a
    package a run installed (with %pip or a pip of its own) can be imported
    by the next, and one pip upgraded shadows Debian's. Costs one stat
    until then."""
    if USER_SITE in sys.path or not os.path.isdir(USER_SITE):
        return
    site.addsitedir(USER_SITE)  # appends it and runs its .pth files
    for i, entry in enumerate(sys.path):
        if entry.endswith(("site-packages", "dist-packages")) and entry != USER_SITE:
            sys.path.remove(USER_SITE)
            sys.path.insert(i, USER_SITE)
            break


# --- the notebook layer --------------------------------------------------------


class Notebook:
    """The notebook layer, notebook.py: its source, read when the worker
    starts, and its module, compiled and run at its first use, so that a
    run that uses none of it pays nothing. What uses it: a cell that does
    not compile (compile), display() and get_ipython()'s shell (builtins,
    see install_builtins), a trailing value of more than a plain type
    (Worker.show), and imports of IPython and ace_tools (hook_notebook).
    """

    def __init__(self, worker, source):
        self.worker = worker
        self.source = source  # None when it could not be read
        self.module = None
        self.shell = TerpShell(self)

    def load(self):
        if self.module is None:
            if self.source is None:
                raise RuntimeError("terp's notebook layer (%s) could not be read when Python started" % NOTEBOOK_FILE)
            module = types.ModuleType(NOTEBOOK_MODULE)
            module.__file__ = NOTEBOOK_FILE
            # For tracebacks, whatever the code did to the file since.
            linecache.cache[NOTEBOOK_FILE] = (len(self.source), None, self.source.splitlines(True), NOTEBOOK_FILE)
            exec(self.code(), module.__dict__)
            module.attach(types.SimpleNamespace(
                worker=self.worker,
                get_ipython=self.get_ipython,
                compile_cell=compile_cell,
                save_figure=save_figure,
                save_image=save_image,
                cut_repr=cut_repr,
                add_user_site=add_user_site,
                work_dir=WORK_DIR,
                files=TERP_FILES,
                print_exception=print_exception,
            ))
            # Its classes (the SList a `!cmd` returns) can then be pickled.
            sys.modules[NOTEBOOK_MODULE] = module
            self.module = module
        return self.module

    def code(self):
        """notebook.py compiled. Compiling it costs some 20 ms, which every
        fresh-mode run that uses the layer would pay again, so the first
        process that compiles it leaves the code in NOTEBOOK_CACHE, under a
        key made of the Python and the source read at start, for the other
        runs and the next worker. Loading it costs under a millisecond."""
        import marshal
        import zlib

        source = self.source.encode("utf-8", "surrogatepass")
        key = b"terp notebook %s %d %08x\n" % (sys.version.encode(), len(source), zlib.crc32(source))
        try:
            with open(NOTEBOOK_CACHE, "rb") as f:
                data = f.read()
            if data.startswith(key):
                return marshal.loads(data[len(key):])
        except (OSError, ValueError, EOFError, TypeError):
            pass  # none yet, or not this source's: compiled anew
        code = compile(self.source, NOTEBOOK_FILE, "exec", dont_inherit=True)
        tmp = "%s.%d" % (NOTEBOOK_CACHE, os.getpid())
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            with open(fd, "wb") as f:
                f.write(key + marshal.dumps(code))
            os.replace(tmp, NOTEBOOK_CACHE)  # whole, for a run reading it meanwhile
        except OSError as e:
            self.worker.log("cannot cache the notebook layer's code: %s" % e)
        return code

    def compile(self, compile_code, code):
        """Returns compile_code(code), or, when code does not compile, what
        compile_code gives for the cell with its IPython syntax made Python.
        Compiling first keeps plain code from ever loading the layer, and
        IPython's syntax is never valid Python."""
        try:
            return compile_code(code)
        except SyntaxError as e:
            error = e
        if self.source is None:
            raise error
        return self.load().recompile(compile_code, code, error)

    def get_ipython(self):
        """Returns terp's IPython shell, as get_ipython() does in a notebook."""
        return self.shell

    def display(self, *objs, **kwargs):
        """Shows objs as a notebook would, as text in the output: an image
        (a matplotlib Figure) is saved as /work/figure_N.png."""
        return self.load().display(*objs, **kwargs)

    def install_builtins(self):
        """Makes get_ipython() and display() builtins, as they are in a
        notebook, for every cell or script."""
        builtins.get_ipython = self.get_ipython
        builtins.display = self.display


class TerpShell:
    """What get_ipython() returns: a stand-in that loads the notebook
    layer's shell at the first use of one of its attributes. Libraries call
    get_ipython() only to see whether they run in a notebook (pandas does
    when it is imported, and at every repr of a DataFrame in a session),
    which must cost nothing; they find no ZMQInteractiveShell, so they do
    not try widgets."""

    __slots__ = ("_notebook",)

    def __init__(self, notebook):
        object.__setattr__(self, "_notebook", notebook)

    def __getattr__(self, name):
        if name == "kernel":
            # pandas asks when it is imported (hasattr) whether it runs in
            # a Jupyter kernel, to choose how wide it prints tables. The
            # answer is no, as before get_ipython() was a builtin, and it
            # needs nothing loaded.
            raise AttributeError(name)
        return getattr(self._notebook.load().shell(), name)

    def __setattr__(self, name, value):
        setattr(self._notebook.load().shell(), name, value)

    def __dir__(self):
        return dir(self._notebook.load().shell())

    def __repr__(self):
        return "<terp's IPython shell>"


class NotebookLoader:
    """Builds a module of the notebook layer's (ace_tools, terp's stand-in
    for IPython) when the code imports it."""

    def __init__(self, notebook):
        self.notebook = notebook

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        self.notebook.load().exec_shim(module)


class IPythonShim:
    """The last finder on sys.meta_path: when no other finds IPython (the
    Docker image has none), it serves the notebook layer's stand-in, so that
    `from IPython.display import display, Markdown` works as in a notebook.
    Its submodules are served only under that stand-in, never beside a real
    IPython."""

    def __init__(self, notebook):
        self.notebook = notebook

    def find_spec(self, name, path, target=None):
        if name != "IPython" and not (name.startswith("IPython.") and
                                      getattr(sys.modules.get("IPython"), "__terp_shim__", False)):
            return None
        # A loader per module: ImportHooks wraps the loader of a module it
        # patches.
        return self.notebook.load().shim_spec(name, NotebookLoader(self.notebook))


# The modules the notebook layer serves ahead of any installed one, and
# those of IPython's it patches as they are imported.
NOTEBOOK_MODULES = ("ace_tools", "caas_jupyter_tools")
IPYTHON_PATCHED = ("IPython.core.getipython", "IPython.core.display_functions")


def hook_notebook(hooks, notebook):
    loader = NotebookLoader(notebook)
    for name in NOTEBOOK_MODULES:
        hooks.serve[name] = loader
    for name in IPYTHON_PATCHED:
        hooks.after[name] = lambda module: notebook.load().patch(module)
    sys.meta_path.append(IPythonShim(notebook))


def read_notebook(log):
    """Returns notebook.py's source, or None if it cannot be read: the
    worker runs plain code all the same."""
    try:
        with open(NOTEBOOK_FILE, encoding="utf-8") as f:
            return f.read()
    except (OSError, ValueError) as e:
        log("cannot read %s: %s" % (NOTEBOOK_FILE, e))
        return None


# --- start-up ------------------------------------------------------------------


def parse_args(argv):
    nonce, prewarm, fresh, value_apart = "", [], False, False
    i = 0
    while i < len(argv):
        if argv[i] in ("--fresh", "--value-apart"):
            fresh = fresh or argv[i] == "--fresh"
            value_apart = value_apart or argv[i] == "--value-apart"
            i += 1
            continue
        if i + 1 < len(argv):
            if argv[i] == "--nonce":
                nonce = argv[i + 1]
            elif argv[i] == "--prewarm":
                prewarm = [m for m in argv[i + 1].split(",") if m]
        i += 2
    return nonce, prewarm, fresh, value_apart


def private_fd(fd, close=False):
    """Returns a non-inheritable copy of fd numbered PRIVATE_FDS or above,
    out of the way of code that uses the low numbers for its own ends."""
    try:
        copy = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, PRIVATE_FDS)
    except OSError:  # a descriptor limit below PRIVATE_FDS
        copy = os.dup(fd)
    if close:
        os.close(fd)
    return copy


def start_prewarm(names, worker):
    """Starts the prewarm imports in a thread of their own and returns the
    Event set when they are over (None when there is nothing to import).

    The worker is ready at once: a run does not wait for the imports, so code
    that needs none of them (or a batch of many cases on a few cores) does not
    pay for them. Code that imports a module the thread is importing waits on
    the import's module lock, as two threads importing one module always do,
    and gets it the moment the thread is done; a cell that imports more
    than the standard library waits for all of them (Worker.execute). Between
    runs the thread imports only while a core is idle (see IdleCoreGate).
    """
    if not names:
        return None
    gate = IdleCoreGate(worker.running)
    done = threading.Event()

    def prewarm():
        gate.thread = threading.get_ident()
        sys.meta_path.insert(0, gate)
        try:
            for name, why in prewarm_modules(names).items():
                worker.log("prewarm %s: %s" % (name, why))
        finally:
            if gate in sys.meta_path:  # the code may have replaced the list
                sys.meta_path.remove(gate)
            done.set()
            worker.tell_warm()

    threading.Thread(target=prewarm, name=PREWARM_THREAD, daemon=True).start()
    return done


class IdleCoreGate:
    """Holds the prewarm thread back, before each module it imports, while
    no core of the machine is idle and no run is in progress.

    The imports cost a second or more of CPU, and on a machine whose cores
    are busy (a batch running many cases at once, say) they would take it
    from code that is running. Lowering the thread's priority does not
    prevent that: every sandbox is a session of its own (bwrap
    --new-session), and with autogroup scheduling, the default, the
    sessions share the CPU equally whatever the nice value or policy of
    their threads; nor could an unprivileged worker raise a priority again
    (RLIMIT_NICE is 0), and the threads an import starts (the BLAS pool)
    would keep it. So the thread waits instead, before each module it
    imports, until /proc/loadavg (which counts the whole machine's runnable
    threads) shows a core that nothing else wants. Waiting for two idle
    cores on two (one left free for work to come) gained a batch nothing
    measurable, and held the prewarm back while a lone conversation waited
    for its model: its first step's code ran 0.23 s later (BenchmarkFirstStep
    in internal/cli, model taking 1 s). While a run is in progress it never
    waits: the code may be waiting for it.
    """

    POLL = 0.02  # seconds between looks at the machine's load

    def __init__(self, running):
        self.running = running
        self.thread = None  # the prewarm thread's ident
        self.cores = len(os.sched_getaffinity(0))

    def find_spec(self, name, path, target=None):
        if threading.get_ident() == self.thread:
            while not self.running.is_set() and self.busy():
                self.running.wait(self.POLL)
        return None

    def busy(self):
        try:
            with open("/proc/loadavg") as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return False
        # Not counting this thread: busy when every core is taken.
        return running - 1 >= self.cores


def prewarm_imports(name):
    """The imports a prewarm of the module name makes, in order."""
    if name == "matplotlib":
        # pyplot builds the font cache; Agg is what the first plot needs.
        return [name, "matplotlib.pyplot", "matplotlib.backends.backend_agg"]
    return [name]


class CollectorPause:
    """Keeps Python's cyclic garbage collector off while the prewarm
    imports, until code runs.

    An import makes hundreds of thousands of objects and frees almost none,
    and the collector, which runs after every 700 net allocations, walks
    them again and again: numpy, pandas and matplotlib import in about 0.31 s
    without it and 0.35 s with it (docs/benchmarks.md). Imports that end
    with the pause held freeze what they made (gc.freeze), which no later
    collection then walks: left in the youngest generation, it would all be
    walked at the next one.

    Code never runs with the collector paused: a kernel's cell releases the
    pause before its code runs (the prewarm then goes on with the collector
    on) and a script's run in its child, which inherits the worker's state
    at the fork. Whatever the code does with gc later is its own: the pause
    is released once, and only by whoever finds it held."""

    def __init__(self):
        self.held = False

    def hold(self):
        if gc.isenabled():
            gc.disable()
            self.held = True

    def release(self, freeze=False):
        if self.held:
            self.held = False
            if freeze:
                gc.freeze()
            gc.enable()


COLLECTOR = CollectorPause()


def prewarm_modules(names, imported=None):
    """Imports the prewarm modules and returns those that failed, with why.
    imported, if given, is called after each import with its name."""
    failed = {}
    COLLECTOR.hold()
    try:
        for name in names:
            try:
                for each in prewarm_imports(name):
                    importlib.import_module(each)
                    if imported is not None:
                        imported(each)
            except BaseException as e:  # noqa: BLE001 - SystemExit from a module too
                failed[name] = "%s: %s" % (type(e).__name__, e)
    finally:
        COLLECTOR.release(freeze=True)
    return failed


class Preload:
    """Script mode's prewarm: the modules of --prewarm, imported in the
    worker before it forks the runs, so that a run's `import pandas` costs
    microseconds instead of half a second, while the run still starts as a
    fresh interpreter would.

    A fresh interpreter has none of them in sys.modules, and whether a
    module is there changes what code does (matplotlib.use switches
    backends once pyplot is imported, libraries look for pandas there
    before they handle its types), so once they are imported the worker
    takes them out of its sys.modules again, as it was before the preload
    (base), and a finder (PreloadFinder) hands a child a module the preload
    imported when the code imports it: the same object, already executed,
    with the modules its own import would have added, which are those its
    import added in the worker, those it imported that were there already
    (ImportTracer) and the preloaded ones it refers to (edges). So after
    `import pandas` a run sees pandas, numpy and their dependencies, but
    not matplotlib, as with `python3 main.py`. Doing that in the worker,
    once, leaves a child nothing to undo: it touches none of the preloaded
    objects, whose pages it would copy, until the code imports them.

    What else the imports changed is put back: the warnings filters they
    added are taken out with the modules and come back with the module
    that added them, and numpy's legacy global RandomState, seeded once at
    its import, is seeded again in each child (Python's random reseeds
    itself after a fork). Everything else
    the modules hold (matplotlib's rcParams and figures, pandas' options) is
    as the import left it, since the worker runs no code of the model's:
    each child gets its own copy of the worker's memory.

    The imports run in a thread of their own, after the worker is ready,
    and only while a core is idle (IdleCoreGate), as a kernel's prewarm.
    A run whose code imports more than the standard library waits for them
    (FreshWorker.await_preload); any other run is forked at once, and its
    child drops what the thread had imported so far (enter_child).
    """

    def __init__(self, names, worker):
        self.names = names
        self.worker = worker
        self.done = threading.Event()  # set once every import is over
        self.progress = threading.Condition()  # notified as each module of names is imported
        self.ready = frozenset()  # the top-level names of the modules of names imported so far
        self.base = frozenset(sys.modules)
        self.base_filters = list(warnings.filters)
        # The modules imported so far (in their order) and, for each, the
        # names of those its import brings, both as of the last module of
        # names imported: a child forked before the end gets these.
        self.modules = {}
        self.edges = {}
        self.filters = {}  # an import's name -> the warnings filters it added
        self.gate = IdleCoreGate(worker.running)
        self.tracer = ImportTracer()
        self.finder = None  # the worker's, set once the modules are put aside

    def start(self):
        threading.Thread(target=self.load, name=PREWARM_THREAD, daemon=True).start()
        return self

    def load(self):
        gate = self.gate
        gate.thread = self.tracer.thread = threading.get_ident()
        sys.meta_path.insert(0, gate)
        self.tracer.install()
        self.groups = {}
        try:
            for name in self.names:
                for failed, why in prewarm_modules([name], self.imported).items():
                    self.worker.log("prewarm %s: %s" % (failed, why))
                self.checkpoint(name)
            self.tracer.uninstall()
            # Only what was there before the preload is left, and the
            # finder brings the rest back on demand, in this process too
            # (an import of the notebook layer's, say, which every later
            # run then sees, as it would without a preload).
            for name in self.modules:
                sys.modules.pop(name, None)
            warnings.filters[:] = self.base_filters
            filters_changed()
            self.finder = PreloadFinder(self, dict(self.modules))
            sys.meta_path.insert(0, self.finder)
            # A child's collections must not touch the preloaded objects'
            # pages, which would copy them (see main).
            gc.freeze()
        except Exception as e:  # noqa: BLE001 - a preload never stops the worker
            self.worker.log("preload: %s" % e)
        finally:
            self.tracer.uninstall()
            if gate in sys.meta_path:
                sys.meta_path.remove(gate)
            self.done.set()
            with self.progress:
                self.progress.notify_all()
            self.worker.tell_warm()

    def imported(self, name):
        """Notes what the import of name, one of prewarm_imports', added."""
        before = set(self.modules).union(*self.groups.values())
        self.groups[name] = [m for m in sys.modules if m not in self.base and m not in before]
        earlier = [f for fs in self.filters.values() for f in fs]
        self.filters[name] = [f for f in warnings.filters if f not in self.base_filters and f not in earlier]

    def checkpoint(self, name):
        """Publishes the modules imported so far, once the prewarm module
        name is, so that a run needing no more need not wait for the rest."""
        modules = {n: m for n, m in sys.modules.items() if n not in self.base and n not in TERP_MODULES}
        edges = module_edges(modules)
        for importer, names in self.tracer.imports.items():
            if importer in edges:
                edges[importer].update(n for n in names if n in modules and n != importer)
        for imported, group in self.groups.items():
            if imported in edges:
                edges[imported].update(n for n in group if n in modules)
        self.edges = edges  # first: a child forked in between has more edges than modules
        self.modules = modules
        with self.progress:
            self.ready = self.ready | {name.split(".")[0]}
            self.progress.notify_all()

    def wait_for(self, tops):
        """Waits until the modules named by tops (top-level names) are
        imported, or all of them when tops is None or names one that is
        not a prewarm module."""
        with self.progress:
            self.progress.wait_for(lambda: self.done.is_set() or (tops is not None and tops <= self.ready))

    def enter_child(self):
        """Makes a just-forked child's interpreter what it was before the
        preload, with the preloaded modules at hand. After the preload the
        worker has put them aside already; before, the child does."""
        if self.done.is_set():
            if self.finder is not None:
                reseed_numpy(self.finder.hidden, self.worker.log)
            return
        # The thread that was importing is gone: a module it was importing
        # stays locked forever, and half executed. What it had imported
        # whole by the last checkpoint is handed over as after the preload;
        # the child imports anything else itself, with locks of its own.
        # What the thread left is kept alive (it may still be referred to),
        # not used.
        modules = self.modules
        self.leftovers = {n: sys.modules.pop(n) for n in list(sys.modules)
                          if n not in self.base and n not in TERP_MODULES}
        warnings.filters[:] = self.base_filters
        filters_changed()
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self.gate and not isinstance(f, PreloadFinder)]
        self.tracer.uninstall()
        forget_module_locks()
        if modules:
            hidden = dict(modules)
            reseed_numpy(hidden, self.worker.log)
            sys.meta_path.insert(0, PreloadFinder(self, hidden))


def reseed_numpy(modules, log):
    """Seeds numpy's legacy global RandomState, which numpy seeded once at
    its import in the worker, anew in a child, from the OS's entropy."""
    legacy = modules.get("numpy.random")
    if legacy is not None:
        try:
            legacy.seed()
        except Exception as e:  # noqa: BLE001
            log("reseeding numpy.random: %s" % e)


class PreloadFinder:
    """The finder and loader of the preloaded modules that were put aside
    (see Preload), first on sys.meta_path: importing one puts it back in
    sys.modules with what its import brings, in the order the preload
    imported them, instead of executing it again. A module the code removes
    from sys.modules and imports again is executed afresh, as Python
    would."""

    def __init__(self, preload, hidden):
        self.preload = preload
        self.hidden = hidden
        self.specs = {}  # the modules' own specs, by name, between find_spec and create_module
        self.restoring = {}  # the same, by the module's id, until exec_module

    def find_spec(self, name, path, target=None):
        module = self.hidden.get(name)
        if module is None:
            return None
        own = getattr(module, "__spec__", None)
        self.specs[name] = own
        spec = importlib.machinery.ModuleSpec(name, self, origin=getattr(own, "origin", None))
        spec.submodule_search_locations = getattr(own, "submodule_search_locations", None)
        return spec

    def create_module(self, spec):
        name = spec.name
        bring, todo = set(), [name]
        while todo:
            n = todo.pop()
            if n in bring or n not in self.hidden:
                continue
            bring.add(n)
            todo.extend(self.preload.edges.get(n, ()))
        # The module itself goes in as the import machinery puts it there.
        bring.discard(name)
        for n in [n for n in self.preload.modules if n in bring]:
            sys.modules[n] = self.hidden.pop(n)
        bring.add(name)
        added = [f for n in bring for f in self.preload.filters.get(n, ()) if f not in warnings.filters]
        if added:
            warnings.filters[:0] = added
            filters_changed()
        module = self.hidden.pop(name)
        self.restoring[id(module)] = self.specs.pop(name, None)
        return module

    def exec_module(self, module):
        # The import machinery gave the module this finder's spec; a
        # module's own says where it came from (importlib.resources reads it).
        module.__spec__ = self.restoring.pop(id(module), None)


class ImportTracer:
    """Records, in the preload thread, which modules each module imports,
    those already imported too, which no finder sees: matplotlib imports
    dateutil (with importlib.import_module, binding nothing), which pandas
    imported first, and a run's `import matplotlib` must bring it all the
    same. It wraps builtins.__import__, which import statements and C
    extensions' imports call once it is replaced, and
    importlib.import_module."""

    def __init__(self):
        self.thread = None
        self.imports = {}  # an importing module's name -> the names it imported
        self.saved = None  # the originals, while installed

    def install(self):
        original_import, original_import_module = builtins.__import__, importlib.import_module
        self.saved = original_import, original_import_module
        tracer = self

        def traced_import(name, globals=None, locals=None, fromlist=(), level=0):
            module = original_import(name, globals, locals, fromlist, level)
            if threading.get_ident() == tracer.thread and globals:
                tracer.record(globals.get("__name__"), name, globals.get("__package__"), level, fromlist)
            return module

        def traced_import_module(name, package=None):
            module = original_import_module(name, package)
            if threading.get_ident() == tracer.thread:
                importer = sys._getframe(1).f_globals.get("__name__")
                tracer.record(importer, module.__name__, None, 0, ())
            return module

        builtins.__import__, importlib.import_module = traced_import, traced_import_module

    def uninstall(self):
        if self.saved is not None:
            builtins.__import__, importlib.import_module = self.saved
            self.saved = None

    def record(self, importer, name, package, level, fromlist):
        if not isinstance(importer, str):
            return
        try:
            if level:
                name = importlib._bootstrap._resolve_name(name, package or importer, level)
        except (ImportError, ValueError, AttributeError, TypeError):
            return
        names = self.imports.setdefault(importer, set())
        names.add(name)
        for attr in fromlist or ():
            if isinstance(attr, str) and attr != "*":
                names.add(name + "." + attr)  # a submodule's name, if it is one


def module_edges(modules):
    """For each module in modules, by name, the others among them it refers
    to: the modules, classes and functions its namespace holds, and its
    package. Its own submodules, bound in its namespace once imported, are
    not: `import matplotlib` does not import matplotlib.pyplot."""
    edges = {}
    for name, module in modules.items():
        refs = set()
        parent = name.rpartition(".")[0]
        if parent in modules:
            refs.add(parent)
        try:
            values = list(vars(module).values())
        except TypeError:
            values = []
        for v in values:
            try:
                if isinstance(v, types.ModuleType):
                    ref = v.__name__
                elif isinstance(v, (type, types.FunctionType, types.BuiltinFunctionType)):
                    ref = v.__module__
                else:
                    continue
            except Exception:  # noqa: BLE001 - a strange object's attributes
                continue
            if isinstance(ref, str) and ref in modules and ref != name and not ref.startswith(name + "."):
                refs.add(ref)
        edges[name] = refs
    return edges


def filters_changed():
    """Tells the warnings module its filters changed, as filterwarnings does."""
    mutated = getattr(warnings, "_filters_mutated", None)
    if mutated is not None:
        mutated()


def forget_module_locks():
    """Drops the per-module import locks of a forked child's parent, which
    threads that do not exist in the child may hold (CPython re-creates only
    the global import lock after a fork)."""
    for attr in ("_module_locks", "_blocking_on"):
        locks = getattr(getattr(importlib, "_bootstrap", None), attr, None)
        if isinstance(locks, dict):
            locks.clear()


def seed_font_cache(log):
    """Copies the backend's matplotlib font cache (the file TERP_FONTLIST
    names, read-only; internal/sandbox/local/fontseed.go) into matplotlib's
    config directory when that has none, so that the first chart does not
    pay for building it. The variable is then dropped: the code's
    environment is as without it."""
    seed = os.environ.pop(FONT_SEED_ENV, "")
    conf = os.environ.get("MPLCONFIGDIR", "")
    if not seed or not conf:
        return
    target = os.path.join(conf, os.path.basename(seed))
    if os.path.exists(target):
        return
    try:
        with open(seed, "rb") as f:
            data = f.read()
        os.makedirs(conf, exist_ok=True)
        with open(target + ".tmp", "wb") as f:
            f.write(data)
        os.replace(target + ".tmp", target)
    except OSError as e:
        log("font cache: %s" % e)


def main():
    if sys.argv[1:2] == ["--repair"]:
        repair_internal_dir(sys.argv[2:])
        return
    nonce, prewarm, fresh, value_apart = parse_args(sys.argv[1:])
    # Private copies of terp's pipes; fd 0, 1 and 2 become /dev/null.
    requests_fd, frames_fd, diag_fd = private_fd(0), private_fd(1), private_fd(2)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    devnull = private_fd(devnull, close=True)
    diag = open(diag_fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace")
    faulthandler.enable(file=diag, all_threads=False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    chan = Channel(frames_fd, lambda msg: write_quietly(diag, "terp worker: %s\n" % msg))
    worker = (FreshWorker if fresh else Worker)(chan, diag, devnull)
    worker.notebook = Notebook(worker, read_notebook(worker.log))
    worker.value_apart = value_apart
    worker.std.bind()

    def in_forked_child():
        worker.forked = True
        chan.sever(devnull)
        os.dup2(devnull, requests_fd, inheritable=False)

    # Flushing before a fork leaves the child no buffered output of the
    # parent's to print a second time.
    os.register_at_fork(before=worker.std.flush_own, after_in_child=in_forked_child)
    become_subreaper(worker.log)
    os.chdir(WORK_DIR)
    seed_font_cache(worker.log)
    sys.path[0] = WORK_DIR  # not /work/.terp, this file's directory
    sys.argv = [""]
    hooks = ImportHooks()
    sys.meta_path.insert(0, hooks)
    hook_notebook(hooks, worker.notebook)
    if not fresh:
        # A child that reaches the interpreter's exit anyway leaves before
        # the std streams are flushed. (A fresh-mode child exits on its own.)
        atexit.register(worker.exit_if_forked, 0)
        hook_matplotlib(hooks, worker)
        # A fresh-mode child gets them itself (run_script), this process
        # being the same for every run.
        worker.notebook.install_builtins()
        # What every cell needs. Not after the ready frame, in the main
        # thread, while the prewarm thread may hold a module lock of one of
        # them (inspect imports ast and tokenize) and wait for an idle core
        # that a busy machine never gives it: the first request would wait
        # as long.
        import ast, tokenize, traceback  # noqa: F401,E401
        worker.prewarmed = start_prewarm(prewarm, worker)
    if fresh:
        # What the worker made so far is never freed: the collector leaves
        # it alone, so a child's collections do not copy its pages.
        gc.freeze()
        if prewarm:
            worker.preload = Preload(prewarm, worker).start()
    chan.begin(nonce)
    chan.send_last(nonce, "ready", {"python": sys.version.split()[0], "pid": os.getpid()})
    worker.started(nonce)

    with open(requests_fd, "rb") as requests:
        while True:
            # A child forked in the tail of the last run must not take the
            # next request.
            worker.exit_if_forked(0)
            line = requests.readline()
            if not line:
                break
            try:
                req = json.loads(line)
                run_nonce, code = req["nonce"], req["code"]
                if not isinstance(run_nonce, str) or not isinstance(code, str):
                    raise ValueError("nonce and code must be strings")
            except (ValueError, KeyError, TypeError) as e:
                worker.log("bad request: %s" % e)
                sys.exit(2)
            worker.run(run_nonce, code)


if __name__ == "__main__":
    main()
