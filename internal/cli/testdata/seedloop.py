"""The seed's loop with its sandbox made local: terp's peer in
BenchmarkScriptModeVsSeedLoop (seedloop_bench_test.go). It is the loop of the
product note terp grew from, in the standard library only (urllib instead of
the openai package, bubblewrap instead of a cpuos microVM), so that what it
costs is the loop and the sandbox, not an SDK's import.

usage: python3 seedloop.py BASE_URL WORKDIR QUESTION
"""
import json, os, subprocess, sys, urllib.request

BASE_URL, WORK, QUESTION = sys.argv[1], sys.argv[2], sys.argv[3]
MAX_STEPS = 20
TOOLS = [{"type": "function", "function": {
    "name": "run_python",
    "description": "Run a Python 3 script in an isolated sandbox. "
    "Files are in /work. Returns exit_code, stdout and stderr.",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
}}]
BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
         "--setenv", "PATH", "/usr/bin:/bin", "--ro-bind", "/usr", "/usr",
         "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
         "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
         "--bind", WORK, "/work", "--chdir", "/work", "--", "python3", "main.py"]


def chat(messages):
    body = json.dumps({"model": "test-model", "messages": messages, "tools": TOOLS}).encode()
    req = urllib.request.Request(BASE_URL + "/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)["choices"][0]["message"]


def run_python(code):
    with open(os.path.join(WORK, "main.py"), "w") as f:
        f.write(code)
    run = subprocess.run(BWRAP, capture_output=True, text=True, timeout=120)
    return json.dumps({"exit_code": run.returncode, "stdout": run.stdout[-4000:], "stderr": run.stderr[-2000:]})


def ask(question):
    messages = [{"role": "system", "content": "You are a data analyst. Use run_python to compute every number."},
                {"role": "user", "content": question}]
    for _ in range(MAX_STEPS):
        msg = chat(messages)
        messages.append(msg)
        if not msg.get("tool_calls"):
            return msg["content"]
        for call in msg["tool_calls"]:
            args = json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": run_python(args["code"])})
    return "Stopped after too many steps."


print(ask(QUESTION))
