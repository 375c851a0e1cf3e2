"""Runs cells in a stock Jupyter kernel for BenchmarkKernelVsJupyter.

Starts ipykernel's python3 kernel through jupyter_client, then reads one JSON
request a line on stdin, {"code": "..."}, runs it and answers one JSON line,
{"seconds": ..., "stdout": "..."} or {"error": "..."}. The time is taken
here, from sending the execute request to the kernel's idle status for it,
so the pipe to the Go side is not counted. The kernel is shut down at EOF.
"""

import json
import sys
import time

from jupyter_client.manager import KernelManager


def run(kc, code):
    """Runs code and returns its seconds, its stdout and an error or None."""
    start = time.perf_counter()
    msg_id = kc.execute(code, store_history=False)
    stdout = []
    error = None
    while True:
        msg = kc.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            break
        if kind == "stream" and content["name"] == "stdout":
            stdout.append(content["text"])
        elif kind == "stream":
            error = "stderr: " + content["text"]
        elif kind == "error":
            error = "%s: %s" % (content["ename"], content["evalue"])
    seconds = time.perf_counter() - start
    # The reply on the shell channel comes before idle; read it so the
    # channel does not fill, outside the time.
    while True:
        reply = kc.get_shell_msg(timeout=60)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    if error is None and reply["content"]["status"] != "ok":
        error = "execute_reply status " + reply["content"]["status"]
    return seconds, "".join(stdout), error


def main():
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        for line in sys.stdin:
            seconds, stdout, error = run(kc, json.loads(line)["code"])
            answer = {"seconds": seconds, "stdout": stdout}
            if error is not None:
                answer = {"error": error, "stdout": stdout}
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
    finally:
        kc.stop_channels()
        km.shutdown_kernel()


if __name__ == "__main__":
    main()
