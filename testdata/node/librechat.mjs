// LibreChat's code execution tool, from @librechat/agents, against terp
// serve's LibreChat API (TestLibreChatClient in internal/cli): the tool is
// made and invoked as LibreChat's ToolNode invokes it (a tool call with the
// session's id and its files injected beside the arguments), with no model.
// The library reads LIBRECHAT_CODE_BASEURL when it is imported; the keys
// come as ALICE_KEY and BOB_KEY, and each tool is given its key as LibreChat
// gives it (a parameter named LIBRECHAT_CODE_API_KEY). Prints one JSON
// summary line for the Go test to check.
import { createCodeExecutionTool, getCodeBaseURL } from '@librechat/agents';
import fetch from 'node-fetch';

const base = getCodeBaseURL();
const alice = createCodeExecutionTool({ LIBRECHAT_CODE_API_KEY: process.env.ALICE_KEY });
const bob = createCodeExecutionTool({ LIBRECHAT_CODE_API_KEY: process.env.BOB_KEY });
const wrong = createCodeExecutionTool({ LIBRECHAT_CODE_API_KEY: 'wrong-key-0123456789abcdef' });

let calls = 0;

// run invokes tool as ToolNode does, with session (LibreChat's record of
// the code session: its id and the files its runs wrote) injected; it
// returns what the model would read, the artifact, or the error.
async function run(tool, args, session) {
  const call = { id: `call_${++calls}`, name: 'execute_code', type: 'tool_call', args };
  if (session?.session_id) {
    call.session_id = session.session_id;
    if (session.files?.length) {
      call._injected_files = session.files.map((f) => ({ session_id: f.session_id ?? session.session_id, id: f.id, name: f.name }));
    }
  }
  try {
    const msg = await tool.invoke(call);
    return { content: msg.content, artifact: msg.artifact ?? null };
  } catch (e) {
    return { error: e.message };
  }
}

// track keeps the session as ToolNode does after a run: the newest file of
// each name, each with the session that wrote it.
function track(session, artifact) {
  if (!artifact?.session_id) return session;
  const fresh = (artifact.files ?? []).map((f) => ({ ...f, session_id: artifact.session_id }));
  const names = new Set(fresh.map((f) => f.name));
  const kept = (session?.files ?? []).filter((f) => !names.has(f.name));
  return { session_id: artifact.session_id, files: [...kept, ...fresh] };
}

// download fetches a file as LibreChat's server does.
async function download(key, sessionId, fileId) {
  const res = await fetch(`${base}/download/${sessionId}/${fileId}`, {
    headers: { 'User-Agent': 'LibreChat/1.0', 'X-API-Key': key },
  });
  return { status: res.status, body: res.ok ? await res.text() : '' };
}

const out = {};
let session;

out.write = await run(alice, {
  lang: 'py',
  code: "secret = 42\nwith open('/mnt/data/report.txt', 'w') as f:\n    f.write('rows: 3')\nprint('wrote the report')",
});
session = track(session, out.write.artifact);

out.again = await run(alice, {
  lang: 'py',
  code: "print(open('/mnt/data/report.txt').read())\ntry:\n    print(secret)\nexcept NameError:\n    print('secret is gone')",
}, session);
session = track(session, out.again.artifact);

const report = session?.files?.find((f) => f.name === 'report.txt');
out.download = report ? await download(process.env.ALICE_KEY, report.session_id, report.id) : null;

// With the session's id and no files, the tool asks /files for them.
out.fallback = await run(alice, { lang: 'py', code: "print(open('/mnt/data/report.txt').read().upper())" },
  { session_id: session?.session_id });

out.image = await run(alice, {
  lang: 'py',
  code: "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.savefig('/mnt/data/squares.png')\nprint('plotted')",
}, session);
session = track(session, out.image.artifact);
const png = session?.files?.find((f) => f.name === 'squares.png');
if (png) {
  const d = await download(process.env.ALICE_KEY, png.session_id, png.id);
  out.imageDownload = { status: d.status, png: d.body.startsWith('\ufffdPNG') };
}

out.bash = await run(alice, { lang: 'bash', code: 'wc -c < /mnt/data/report.txt' }, session);
out.wrongKey = await run(wrong, { lang: 'py', code: "print('never')" });
out.unsupported = await run(alice, { lang: 'js', code: "console.log('hi')" });

// Bob sends alice's session and files: his run reaches none of them.
out.bob = await run(bob, { lang: 'py', code: "import os\nprint(sorted(n for n in os.listdir('/mnt/data') if not n.startswith('.')))" }, session);
out.bobDownload = report ? await download(process.env.BOB_KEY, report.session_id, report.id) : null;

out.session = session;
console.log(JSON.stringify(out));
