// JupyterLab's own client library, @jupyterlab/services, driving a Jupyter
// server's kernels as JupyterLab does: JUPYTER_BASE_URL is the server (terp
// serve, a jupyter_server in gateway mode in front of it, or a stock
// jupyter_server for the harness's self-check), JUPYTER_TOKEN its token.
// It opens a notebook session, runs cells that print, show a figure, end in
// an expression and raise, interrupts a long cell, restarts the kernel and
// shuts it down, then starts a bare kernel as a console would; it prints
// one JSON object with what it saw, for the Go tests (internal/cli
// serve_jupyter_test.go) to check, and exits non-zero on any error,
// including a message the library's validation rejects.
import {
  KernelManager,
  KernelSpecManager,
  ServerConnection,
  SessionManager,
} from "@jupyterlab/services";
import WebSocket from "ws";

const baseUrl = process.env.JUPYTER_BASE_URL;
const token = process.env.JUPYTER_TOKEN;
if (!baseUrl || !token) {
  console.error("set JUPYTER_BASE_URL and JUPYTER_TOKEN");
  process.exit(2);
}

// A message the library rejects is thrown from the websocket's handler;
// it must fail the run, not pass unseen.
process.on("uncaughtException", (err) => {
  console.error("uncaught:", err);
  process.exit(1);
});
process.on("unhandledRejection", (err) => {
  console.error("unhandled rejection:", err);
  process.exit(1);
});

// The library's own WebSocket under Node is ws; this one records what each
// connection offered and what the server selected, which is what decides
// between the v1 binary protocol and the legacy JSON one.
const sockets = [];
class RecordingWebSocket extends WebSocket {
  constructor(url, protocols) {
    super(url, protocols);
    const seen = { path: new URL(url).pathname, offered: protocols ?? [], selected: null };
    sockets.push(seen);
    this.addEventListener("open", () => {
      seen.selected = this.protocol;
    });
  }
}

const serverSettings = ServerConnection.makeSettings({
  baseUrl,
  token,
  WebSocket: RecordingWebSocket,
});

// within fails with what was being waited for, not with the Go test's
// deadline.
function within(promise, seconds, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${seconds}s: ${what}`)), seconds * 1000);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// run executes code and returns what the notebook would render of it: the
// iopub messages in order, the streams, the outputs (images by their size
// and shape, not their bytes), the error and the reply.
async function run(kernel, name, code, { onStream } = {}) {
  const cell = {
    name,
    messages: [],
    stdout: "",
    stderr: "",
    outputs: [],
    error: null,
    execute_input_count: null,
    reply: null,
  };
  const future = kernel.requestExecute({ code, stop_on_error: true });
  future.onIOPub = (msg) => {
    const type = msg.header.msg_type;
    const content = msg.content;
    cell.messages.push(type === "status" ? `status:${content.execution_state}` : type);
    switch (type) {
      case "execute_input":
        cell.execute_input_count = content.execution_count;
        break;
      case "stream":
        cell[content.name] += content.text;
        onStream?.(cell);
        break;
      case "display_data":
      case "execute_result": {
        const png = content.data["image/png"];
        cell.outputs.push({
          type,
          mimetypes: Object.keys(content.data).sort(),
          text: content.data["text/plain"] ?? null,
          png_base64_bytes: png === undefined ? null : png.length,
          png_one_line: png === undefined ? null : !/\s/.test(png.trim()),
          png_signature: png === undefined ? null : Buffer.from(png, "base64").subarray(0, 8).toString("hex"),
          execution_count: content.execution_count ?? null,
        });
        break;
      }
      case "error":
        cell.error = {
          ename: content.ename,
          evalue: content.evalue,
          traceback_is_list: Array.isArray(content.traceback),
          traceback_lines: Array.isArray(content.traceback) ? content.traceback.length : 0,
        };
        break;
    }
  };
  const reply = await within(future.done, 120, `the reply to cell ${name}`);
  cell.reply = {
    status: reply.content.status,
    execution_count: reply.content.execution_count ?? null,
    ename: reply.content.ename ?? null,
    channel: reply.channel,
  };
  return cell;
}

const summary = { sockets };

// The launcher's first call: which kernels the server has.
const specs = new KernelSpecManager({ serverSettings });
await within(specs.ready, 30, "the kernel specs");
if (!specs.specs) {
  throw new Error("the server gave no kernel specs (is the token right?)");
}
summary.specs = {
  default: specs.specs.default,
  names: Object.keys(specs.specs.kernelspecs).sort(),
  language: specs.specs.kernelspecs[specs.specs.default]?.language ?? null,
};

// A notebook opened in JupyterLab: a session, which starts a kernel.
const kernelManager = new KernelManager({ serverSettings });
const sessionManager = new SessionManager({ kernelManager, serverSettings });
await within(sessionManager.ready, 30, "the session manager");
const session = await within(
  sessionManager.startNew({
    path: "analysis.ipynb",
    type: "notebook",
    name: "analysis.ipynb",
    kernel: { name: specs.specs.default },
  }),
  120,
  "a new session",
);
const kernel = session.kernel;
const info = await within(kernel.info, 120, "kernel_info_reply");
summary.session = {
  path: session.path,
  type: session.type,
  kernel_id: kernel.id,
  kernel_name: kernel.name,
};
summary.kernel_info = {
  status: info.status,
  protocol_version: info.protocol_version,
  language: info.language_info?.name ?? null,
  implementation: info.implementation,
};

const cells = [];
cells.push(await run(kernel, "print", "x = 21\nprint('hello from a cell')\nimport sys\nprint('a warning', file=sys.stderr)"));
cells.push(
  await run(
    kernel,
    "figure",
    "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.show()",
  ),
);
cells.push(await run(kernel, "expression", "x * 2"));
cells.push(await run(kernel, "error", "1 / 0"));

// A cell that would sleep a minute, interrupted once it has printed: the
// interrupt goes by the REST API, as JupyterLab's stop button sends it.
let interrupted = false;
cells.push(
  await run(kernel, "interrupt", "import time\nprint('sleeping', flush=True)\ntime.sleep(60)\nprint('woke up')", {
    onStream: (cell) => {
      if (!interrupted && cell.stdout.includes("sleeping")) {
        interrupted = true;
        kernel.interrupt().catch((err) => {
          console.error("interrupt:", err);
          process.exit(1);
        });
      }
    },
  }),
);
cells.push(await run(kernel, "after_interrupt", "x"));

// Restart: the same kernel id, fresh Python. JUPYTER_SKIP_RESTART=1 leaves
// it out (the Go tests say when, and why).
const kernelId = kernel.id;
if (process.env.JUPYTER_SKIP_RESTART !== "1") {
  await within(kernel.restart(), 120, "the restart");
  await within(kernel.requestKernelInfo(), 60, "kernel_info_reply after the restart");
  const restarted = await run(kernel, "after_restart", "'x' in globals()");
  restarted.same_kernel_id = kernel.id === kernelId;
  cells.push(restarted);
}
summary.cells = cells;

// Closing the notebook's kernel: the session and its kernel go.
await within(session.shutdown(), 60, "the session's shutdown");
await within(sessionManager.refreshRunning(), 30, "the sessions list");
await within(kernelManager.refreshRunning(), 30, "the kernels list");
summary.shutdown = {
  sessions_left: [...sessionManager.running()].length,
  kernel_listed: [...kernelManager.running()].some((m) => m.id === kernelId),
};

// A console's kernel: started by itself (POST /api/kernels with a name),
// used, and shut down.
const bare = await within(kernelManager.startNew({ name: specs.specs.default }), 120, "a new kernel");
await within(bare.info, 120, "the bare kernel's kernel_info_reply");
const bareCell = await run(bare, "bare_kernel", "print(sum(range(10)))");
await within(bare.shutdown(), 60, "the bare kernel's shutdown");
await within(kernelManager.refreshRunning(), 30, "the kernels list");
summary.bare = {
  cell: bareCell,
  kernel_listed: [...kernelManager.running()].some((m) => m.id === bare.id),
};

sessionManager.dispose();
kernelManager.dispose();
specs.dispose();
console.log(JSON.stringify(summary));
process.exit(0);
