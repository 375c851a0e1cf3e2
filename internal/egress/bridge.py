# terp's egress bridge: the inside half of the allowlist mode (see bridge.go).
# Usage: python3 -I -S -c SCRIPT PORT SOCKET -- COMMAND...
# It listens on 127.0.0.1:PORT in the sandbox's own network namespace, leaves
# a daemon behind that forwards each connection to the proxy's Unix SOCKET,
# and then becomes COMMAND (exec), so the command keeps this process's pid,
# signals, streams and exit status. The daemon is double-forked into a session
# of its own, so that it is not the command's child nor in its session: the
# kernel worker kills its descendants after every run, Docker's run.py kills
# its session, and the daemon must outlive runs. It dies with the sandbox's
# pid namespace (bubblewrap) or when terp stops the sandbox's sessions
# (Docker), and the next command starts another.
import errno, os, socket, sys, threading, time

def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

def serve(listener, path):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            time.sleep(0.1)  # out of descriptors, say: wait rather than spin
            continue
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(path)
        except OSError:
            conn.close()
            up.close()
            continue
        for a, b in ((conn, up), (up, conn)):
            threading.Thread(target=pump, args=(a, b), daemon=True).start()

def main():
    port, path, sep, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    if sep != "--" or not cmd:
        sys.exit("usage: bridge PORT SOCKET -- COMMAND...")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(("127.0.0.1", port))
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        # Where commands share a network namespace (a Docker container), the
        # bridge an earlier command left behind already serves.
        listener.close()
        listener = None
    if listener is not None:
        listener.listen(128)
        pid = os.fork()
        if pid == 0:
            if os.fork() == 0:
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.setsid()
                serve(listener, path)
            os._exit(0)
        os.waitpid(pid, 0)
        listener.close()
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        sys.stderr.write("%s: %s\n" % (cmd[0], e.strerror))
        sys.exit(127 if e.errno == 2 else 126)

main()
