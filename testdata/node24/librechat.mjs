// The newest @librechat/agents' code execution tool against terp serve's
// LibreChat API (TestLibreChatSignedClient in internal/cli): no key, but
// the token LibreChat signs for each request, which the tool gets from its
// authHeaders parameter as LibreChat gives it. The tokens are signed here
// as LibreChat's server signs them (header {alg, typ, kid}; claims iss,
// aud, sub, iat, nbf, exp five minutes on, jti, tenant_id, role,
// principal_source, auth_context_hash): alice's tenant with an Ed25519 key
// (EdDSA), bob's with an RSA key (RS256), and a stranger's with a key terp
// does not trust. The tool is invoked as LibreChat's ToolNode invokes it,
// with the newer file references ({id, resource_id, name,
// storage_session_id, kind}). Prints one JSON summary line.
import { createCodeExecutionTool, getCodeBaseURL } from '@librechat/agents';
import { createHash, createPrivateKey, randomUUID, sign } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fetch from 'node-fetch';

const base = getCodeBaseURL();

// signer signs tokens for tenant with the private key in file, by alg.
function signer(file, alg, tenant) {
  const key = createPrivateKey(readFileSync(file));
  return () => {
    const now = Math.floor(Date.now() / 1000);
    const enc = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const claims = {
      iss: 'librechat', aud: 'codeapi', sub: `user-of-${tenant}`, iat: now, nbf: now, exp: now + 300,
      jti: randomUUID(), tenant_id: tenant, role: 'USER', principal_source: 'librechat_jwt',
      auth_context_hash: createHash('sha256').update(tenant).digest('hex'),
    };
    const input = `${enc({ alg, typ: 'JWT', kid: process.env.TOKEN_KID })}.${enc(claims)}`;
    const sig = sign(alg === 'RS256' ? 'RSA-SHA256' : null, Buffer.from(input), key);
    return { Authorization: `Bearer ${input}.${sig.toString('base64url')}` };
  };
}

const aliceHeaders = signer(process.env.ALICE_SIGNING_KEY, 'EdDSA', process.env.ALICE_TENANT);
const bobHeaders = signer(process.env.BOB_SIGNING_KEY, 'RS256', process.env.BOB_TENANT);
const strangerHeaders = signer(process.env.STRANGER_SIGNING_KEY, 'EdDSA', process.env.ALICE_TENANT);
const tool = (authHeaders, user) => createCodeExecutionTool({ user_id: user, authHeaders: async () => authHeaders() });
const alice = tool(aliceHeaders, 'alice');
const bob = tool(bobHeaders, 'bob');
const stranger = tool(strangerHeaders, 'stranger');

let calls = 0;

// run invokes tool as ToolNode does, with session's files injected in the
// newer references' shape.
async function run(t, args, session) {
  const call = { id: `call_${++calls}`, name: 'execute_code', type: 'tool_call', args };
  if (session?.session_id) {
    call.session_id = session.session_id;
    call._injected_files = (session.files ?? []).map((f) => ({
      id: f.id, resource_id: 'user-1', name: f.name, storage_session_id: f.storage_session_id, kind: 'user',
    }));
  }
  try {
    const msg = await t.invoke(call);
    return { content: msg.content, artifact: msg.artifact ?? null };
  } catch (e) {
    return { error: e.message };
  }
}

// track keeps the session as ToolNode does: the newest file of each name,
// each with the storage session it lives in.
function track(session, artifact) {
  if (!artifact?.session_id) return session;
  const fresh = artifact.files ?? [];
  const names = new Set(fresh.map((f) => f.name));
  const kept = (session?.files ?? []).filter((f) => !names.has(f.name));
  return { session_id: artifact.session_id, files: [...kept, ...fresh] };
}

async function download(headers, file) {
  const res = await fetch(`${base}/download/${file.storage_session_id}/${file.id}`, {
    headers: { 'User-Agent': 'LibreChat/1.0', ...headers() },
  });
  return { status: res.status, body: res.ok ? (await res.buffer()).toString('latin1') : '' };
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
out.download = report ? await download(aliceHeaders, report) : null;
out.image = await run(alice, {
  lang: 'py',
  code: "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.savefig('/mnt/data/squares.png')\nprint('plotted')",
}, session);
session = track(session, out.image.artifact);
const png = session?.files?.find((f) => f.name === 'squares.png');
if (png) {
  const d = await download(aliceHeaders, png);
  out.imageDownload = { status: d.status, png: d.body.startsWith('\x89PNG') };
}
out.stranger = await run(stranger, { lang: 'py', code: "print('never')" });
out.unsupported = await run(alice, { lang: 'r', code: 'print(1)' });
out.bob = await run(bob, { lang: 'py', code: "import os\nprint(sorted(n for n in os.listdir('/mnt/data') if not n.startswith('.')))" }, session);
out.bobDownload = report ? await download(bobHeaders, report) : null;
out.session = session;
console.log(JSON.stringify(out));
