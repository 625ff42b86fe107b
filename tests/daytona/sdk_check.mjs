// Daytona's official TypeScript SDK (@daytonaio/sdk, pinned in package.json) against
// daytona_fake.py, through Stoplight Prism in front of it (stack.mjs): what rex's `daytona`
// deployment does, done by Daytona's own client, and every request and answer of the API and the
// toolbox checked against Daytona's OpenAPI documents.
//
//   REX_DAYTONA_ENV=DIR node tests/daytona/sdk_check.mjs
//
// DIR: where scripts/common.sh's rex_daytona_env installed the SDK, Prism and the documents.
// It fails on any assertion, and on any violation Prism reports (Prism answers 500 with
// sl-violations under --errors, and logs it), except the one Prism always reports for the API's
// 4xx answers: Daytona's API document lists only the success status of each operation.
// With DAYTONA_API_URL, DAYTONA_API_KEY and DAYTONA_FAKE_URL set, it runs the same steps against
// those instead, starting nothing. Prints "ok: ..." and a closing "N passed, N failed".
import assert from "node:assert/strict";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

import { envDir, startEverything, stopAll, violations } from "./stack.mjs";

assert.ok(envDir, "REX_DAYTONA_ENV must name the directory rex_daytona_env installed");
const require = createRequire(path.join(envDir, "package.json"));
const { Daytona, DaytonaAuthenticationError, DaytonaNotFoundError } = require("@daytonaio/sdk");

const step = (what) => console.log(`step: ${what}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A tiny HTTP server for the sandbox, uploaded with the SDK and started by an async command.
const SERVER = `
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = ("hello from the sandbox: " + self.path + " token=" +
                str(self.headers.get("X-Daytona-Preview-Token"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
`;

// --- The checks ----------------------------------------------------------------------------------

async function checks({ apiUrl, apiKey, fakeUrl }) {
  // No socket.io: the fake (like Daytona's documents) has no event gateway; the SDK then polls.
  const config = { apiKey, apiUrl, target: "us", useDeprecatedPolling: true };
  const daytona = new Daytona(config);
  async function fakeSandboxes() {
    const answer = await fetch(`${fakeUrl}/_fake/sandboxes`);
    assert.equal(answer.status, 200);
    return answer.json();
  }

  step("a wrong API key is refused with 401");
  {
    const wrong = new Daytona({ ...config, apiKey: "not-the-key" });
    await assert.rejects(wrong.get("anything"), (e) => {
      assert.ok(e instanceof DaytonaAuthenticationError, `got ${e?.constructor?.name}: ${e?.message}`);
      assert.equal(e.statusCode, 401);
      return true;
    });
    // The body of Daytona's API errors (apps/api/src/filters/all-exceptions.filter.ts), which its
    // document does not describe.
    const raw = await fetch(`${fakeUrl}/sandbox`, { headers: { Authorization: "Bearer not-the-key" } });
    assert.equal(raw.status, 401);
    const body = await raw.json();
    assert.deepEqual(Object.keys(body).sort(), ["error", "message", "path", "statusCode", "timestamp"]);
    assert.equal(body.statusCode, 401);
  }

  step("create from an image, and wait until started");
  const started = Date.now();
  const sandbox = await daytona.create(
    { image: "python:3.12", envVars: { GREETING: "hello" }, labels: { purpose: "rex-check" } },
    { timeout: 60 },
  );
  assert.equal(sandbox.state, "started");
  assert.ok(Date.now() - started >= 200, "the fake starts sandboxes after a delay, so the SDK waited");
  assert.equal(sandbox.buildInfo?.dockerfileContent, "FROM python:3.12\n");
  assert.ok(sandbox.toolboxProxyUrl, "the sandbox has a toolbox URL");

  step("get and list");
  const again = await daytona.get(sandbox.id);
  assert.equal(again.id, sandbox.id);
  assert.equal(again.state, "started");
  assert.equal(again.env.GREETING, "hello");
  const listed = [];
  for await (const s of daytona.list({ labels: { purpose: "rex-check" } })) listed.push(s.id);
  assert.deepEqual(listed, [sandbox.id]);
  await assert.rejects(daytona.get("no-such-sandbox"), (e) => e instanceof DaytonaNotFoundError);

  step("a session, and a synchronous command in it");
  await sandbox.process.createSession("rex");
  const sync = await sandbox.process.executeSessionCommand("rex", {
    command: 'echo "$GREETING from $DAYTONA_SANDBOX_ID"; echo oops >&2; exit 3',
  });
  assert.equal(sync.exitCode, 3);
  assert.equal(sync.stdout, `hello from ${sandbox.id}\n`);
  assert.equal(sync.stderr, "oops\n");
  assert.ok(sync.cmdId);

  step("upload a file, download it back");
  await sandbox.fs.uploadFile(Buffer.from(SERVER), "server.py");
  const back = await sandbox.fs.downloadFile("server.py");
  assert.equal(back.toString(), SERVER);

  step("an async command starts a server");
  const port = 8000;
  const started2 = await sandbox.process.executeSessionCommand("rex", {
    command: `exec python3 server.py 0.0.0.0 ${port}`,
    runAsync: true,
  });
  assert.ok(started2.cmdId);
  assert.equal(started2.exitCode, undefined);
  const running = await sandbox.process.getSessionCommand("rex", started2.cmdId);
  assert.equal(running.exitCode, undefined, "the server still runs");
  const session = await sandbox.process.getSession("rex");
  assert.deepEqual(session.commands.map((c) => c.id), [sync.cmdId, started2.cmdId]);

  step("the preview link reaches it with its token, and only with it");
  const link = await sandbox.getPreviewLink(port);
  assert.equal(link.sandboxId, sandbox.id);
  assert.ok(link.url && link.token);
  let body;
  for (let i = 0; ; i++) {
    const r = await fetch(`${link.url}/ping?x=1`, { headers: { "X-Daytona-Preview-Token": link.token } });
    if (r.status === 200) {
      body = await r.text();
      break;
    }
    assert.equal(r.status, 502, "until the server listens, the proxy answers 502");
    assert.ok(i < 100, "the server did not answer through the preview link");
    await sleep(100);
  }
  // The proxy takes the token off before it forwards the request.
  assert.equal(body, "hello from the sandbox: /ping?x=1 token=None");
  const anonymous = await fetch(`${link.url}/ping`, { redirect: "manual" });
  assert.equal(anonymous.status, 307, "Daytona's proxy sends a request without a token to log in");
  const followed = await fetch(`${link.url}/ping`);
  assert.equal(followed.status, 401);
  const wrongToken = await fetch(`${link.url}/ping`, {
    headers: { "X-Daytona-Preview-Token": "wrong" }, redirect: "manual",
  });
  assert.equal(wrongToken.status, 307);
  const logs = await sandbox.process.getSessionCommandLogs("rex", sync.cmdId);
  assert.equal(logs.stdout, `hello from ${sandbox.id}\n`);

  step("a sandbox whose image fails to build");
  await assert.rejects(
    daytona.create({ image: "fake-fail:latest" }, { timeout: 30 }),
    (e) => /build_failed/.test(e.message),
  );

  step("delete, and wait until destroyed");
  let remaining = await fakeSandboxes();
  const mine = remaining.find((s) => s.id === sandbox.id);
  assert.equal(mine.processes.length, 1, "the server's process group is alive");
  await daytona.delete(sandbox, 60, true);
  assert.equal(sandbox.state, "destroyed");
  await assert.rejects(daytona.get(sandbox.id), (e) => e instanceof DaytonaNotFoundError);
  const gone = await fetch(`${link.url}/ping`, { headers: { "X-Daytona-Preview-Token": link.token } }).then(
    () => "answered",
    () => "refused",
  );
  assert.equal(gone, "refused", "the preview link is closed with the sandbox");

  step("the failed sandbox goes too, and nothing remains");
  for (const s of remaining.filter((s) => s.id !== sandbox.id)) {
    await daytona.delete(await daytona.get(s.id), 60, true);
  }
  remaining = await fakeSandboxes();
  assert.deepEqual(remaining, [], `left over: ${JSON.stringify(remaining)}`);

  await daytona[Symbol.asyncDispose]();
}

// --- Main ----------------------------------------------------------------------------------------

let passed = 0;
let failed = 0;
const given = process.env.DAYTONA_API_URL;
let setup = null;
try {
  if (given) {
    await checks({ apiUrl: given, apiKey: process.env.DAYTONA_API_KEY, fakeUrl: process.env.DAYTONA_FAKE_URL });
  } else {
    setup = await startEverything();
    await checks(setup);
    const found = setup.prisms.flatMap((p) => violations(p).map((v) => `${p.name}: ${v}`));
    assert.deepEqual(found, [], `Prism reported violations:\n${found.join("\n")}`);
    step("Prism does check: a request against the document is refused");
    const bad = await fetch(`${setup.apiUrl}/sandbox`, {
      method: "POST",
      headers: { Authorization: `Bearer ${setup.apiKey}`, "Content-Type": "application/json" },
      body: JSON.stringify({ cpu: "many" }),
    });
    assert.equal(bad.status, 422, "Prism let a request with a string for cpu through");
    const problem = await bad.json();
    assert.match(problem.type, /UNPROCESSABLE_ENTITY/);
  }
  console.log("ok: Daytona TypeScript SDK against the fake" + (given ? "" : ", through Prism"));
  passed++;
} catch (e) {
  console.error(e);
  failed++;
} finally {
  await stopAll();
  if (setup) {
    const fakeExit = setup.fake.exited;
    if (fakeExit.code !== 0) {
      console.error(`the fake exited with ${JSON.stringify(fakeExit)}; its log:\n${setup.fake.output.slice(-4000)}`);
      if (failed === 0) (passed--, failed++);
    }
    if (failed) {
      for (const p of setup.prisms) console.error(`--- ${p.name}, the end of its log:\n${p.output.slice(-3000)}`);
    }
    fs.rmSync(setup.scratch, { recursive: true, force: true });
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
