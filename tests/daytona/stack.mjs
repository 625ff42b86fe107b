// The Daytona stand-in the tests use, on loopback: daytona_fake.py behind two Stoplight Prism
// proxies (pinned in package.json), one validating against Daytona's API document and one against
// its toolbox document, so that every request a client makes and every answer the fake gives is
// checked against Daytona's OpenAPI documents:
//   client -> Prism (API document)     -> fake's API
//   client -> upload front -> Prism (toolbox document) -> fake's toolbox   (the fake gives out
//                                               the front's URL as the sandboxes' toolboxProxyUrl;
//                                               see startUploadFront for what it does to uploads)
//   client -> the fake's preview proxies -> the sandbox's server (no document covers these)
//
// Imported by sdk_check.mjs; run on its own it serves until SIGTERM or stdin closes:
//   REX_DAYTONA_ENV=DIR node tests/daytona/stack.mjs [--start-delay SECONDS]
// prints `READY api=URL key=KEY fake=URL` once everything answers and, when it ends, one line
// `VIOLATIONS N` followed by Prism's complaints, exiting 1 if there were any (or if the fake did
// not exit cleanly).
//
// REX_DAYTONA_ENV: where scripts/common.sh's rex_daytona_env installed package-lock.json (`npm
// ci`) and wrote the OpenAPI documents (DIR/openapi/daytona_api_client.json and
// daytona_toolbox_api_client.json, rebuilt by openapi_from_clients.py from Daytona's Python
// clients of the same release). The fake runs with python3 (or $PYTHON).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const envDir = process.env.REX_DAYTONA_ENV || process.env.REX_DAYTONA_JS;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- The processes -------------------------------------------------------------------------------

const children = [];

function start(name, command, args) {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  const entry = { name, child, output: "", exited: null };
  child.stdout.on("data", (d) => (entry.output += d));
  child.stderr.on("data", (d) => (entry.output += d));
  entry.exit = new Promise((resolve) => child.on("exit", (code, signal) => resolve((entry.exited = { code, signal }))));
  children.push(entry);
  return entry;
}

export async function stopAll() {
  for (const entry of children.reverse()) {
    if (entry.exited === null) entry.child.kill("SIGTERM");
    const timer = setTimeout(() => entry.exited === null && entry.child.kill("SIGKILL"), 10000);
    await entry.exit;
    clearTimeout(timer);
  }
}

// A port for a server started later (Prism takes its port on the command line): one below the
// kernel's range for ephemeral ports (32768 and up here), so that no socket bound to port 0 in
// the meantime, by this stack or a test running beside it, can take it first; checked free.
function freePort() {
  const tryPort = (port) => new Promise((resolve) => {
    const server = net.createServer();
    server.on("error", () => resolve(0));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(port)));
  });
  return (async () => {
    for (let attempt = 0; attempt < 100; ++attempt) {
      const port = await tryPort(20000 + Math.floor(Math.random() * 12000));
      if (port) return port;
    }
    throw new Error("found no free port between 20000 and 32000");
  })();
}

export async function until(what, probe, seconds = 60) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      if (await probe()) return;
    } catch {
      // not yet
    }
    assert.ok(Date.now() < deadline, `${what} did not come up within ${seconds} s`);
    await sleep(100);
  }
}

// A probe's fetch options: it gives up after 2 s (whatever holds a port may never answer).
const quick = () => ({ signal: AbortSignal.timeout(2000) });

// Prism on a port chosen by freePort(); should something take that port between the check and
// Prism's listen (another stack beside this one), Prism exits and is started again on another.
async function startPrism(name, doc, fakeUrl, answers) {
  const prism = path.join(envDir, "node_modules", ".bin", "prism");
  for (let attempt = 1; ; ++attempt) {
    const port = await freePort();
    const entry = start(name, prism, ["proxy", doc, fakeUrl, "--errors", "-h", "127.0.0.1", "-p", String(port)]);
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60000;
    for (;;) {
      let up = false;
      try {
        up = await answers(url);
      } catch {
        // not yet
      }
      // Its own line, not only an answer: the answer might come from whoever took the port.
      if (up && entry.exited === null && entry.output.includes(`Prism is listening on ${url}`)) {
        return { prism: entry, port };
      }
      if (entry.exited !== null) break;
      assert.ok(Date.now() < deadline, `${name} did not come up within 60 s:\n${entry.output.slice(-2000)}`);
      await sleep(100);
    }
    assert.ok(attempt < 5 && /EADDRINUSE/.test(entry.output),
      `${name} exited (${JSON.stringify(entry.exited)}) before it answered:\n${entry.output.slice(-2000)}`);
    children.splice(children.indexOf(entry), 1);
  }
}

// The toolbox document as Prism can use it: Prism matches paths and ignores the servers' base
// path, and the SDK calls {toolboxProxyUrl}/{sandboxId}/..., with toolboxProxyUrl = .../toolbox.
// Prism also cannot validate a multipart/form-data answer (it looks for the boundary in the
// request's headers: prism-http validateOutput), so those answers keep their status, not their
// body schema.
function toolboxDocument(doc) {
  const paths = {};
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const op of Object.values(item)) {
      op.parameters = [{ name: "sandboxId", in: "path", required: true, schema: { type: "string" } },
        ...(op.parameters ?? [])];
      // The SDKs' upload (POST /files/bulk-upload, multipart: files[N].path and files[N].file)
      // is documented without its body; declared here as the form it is, so Prism lets it pass.
      if (p === "/files/bulk-upload" && !op.requestBody) {
        op.requestBody = { content: { "multipart/form-data": { schema: { type: "object" } } } };
      }
      for (const answer of Object.values(op.responses ?? {})) {
        if (answer.content?.["multipart/form-data"]) delete answer.content;
      }
    }
    paths[`/toolbox/{sandboxId}${p}`] = item;
  }
  return { ...doc, paths };
}

// Prism decodes a request body as UTF-8 text before it forwards it, so a binary file uploaded
// through it arrives mangled (every byte that is not UTF-8 replaced by U+FFFD), and it refuses
// bodies over 10 MB (a sanitizer build's rex-server is more). The toolbox's clients therefore
// reach Prism through this front: it passes every request on as it is, except a multipart upload,
// whose copy with each file's content replaced by a line of text (the same form, fields and
// headers) goes through Prism to be checked against the document and answered by the fake; once
// that succeeded, the upload itself goes to the fake as it was, and its answer back.
function multipartWithTextFiles(body, contentType) {
  const boundary = /boundary="?([^";]+)"?/.exec(contentType)?.[1];
  if (!boundary) return body;
  const delimiter = Buffer.from(`--${boundary}`);
  const parts = [];
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const next = body.indexOf(delimiter, at + delimiter.length);
    if (next < 0) {
      parts.push(body.subarray(at));  // the closing delimiter
      break;
    }
    const part = body.subarray(at, next);
    const split = part.indexOf("\r\n\r\n");
    const head = split < 0 ? part : part.subarray(0, split + 4);
    if (split >= 0 && /filename=/.test(head.toString("latin1"))) {
      const content = part.subarray(split + 4, part.length - 2);  // less the CRLF before `next`
      parts.push(head, Buffer.from(`(${content.length} bytes, sent to the fake as they are)`),
        Buffer.from("\r\n"));
    } else {
      parts.push(part);
    }
    at = next;
  }
  return Buffer.concat(parts);
}

function forward(port, request, headers, body) {
  return new Promise((resolve, reject) => {
    const out = http.request({ host: "127.0.0.1", port, method: request.method, path: request.url, headers },
      (answer) => {
        const chunks = [];
        answer.on("data", (c) => chunks.push(c));
        answer.on("end", () => resolve({ status: answer.statusCode, headers: answer.headers, body: Buffer.concat(chunks) }));
        answer.on("error", reject);
      });
    out.on("error", reject);
    out.end(body);
  });
}

// Listens on a port of its own choosing at once (the fake must be told the front's URL before it
// starts); `to.prism` and `to.fake` are filled in once those are up, before any request comes.
function startUploadFront(to) {
  const server = http.createServer(async (request, response) => {
    const chunks = [];
    for await (const c of request) chunks.push(c);
    const body = Buffer.concat(chunks);
    const type = request.headers["content-type"] ?? "";
    const headers = { ...request.headers };
    delete headers["transfer-encoding"];
    try {
      let answer;
      if (request.method === "POST" && type.startsWith("multipart/form-data")) {
        const copy = multipartWithTextFiles(body, type);
        answer = await forward(to.prism, request, { ...headers, "content-length": copy.length }, copy);
        if (answer.status >= 200 && answer.status < 300) {
          answer = await forward(to.fake, request, { ...headers, "content-length": body.length }, body);
        }
      } else {
        answer = await forward(to.prism, request, { ...headers, "content-length": body.length }, body);
      }
      const back = { ...answer.headers };
      delete back["transfer-encoding"];
      response.writeHead(answer.status, { ...back, "content-length": answer.body.length });
      response.end(answer.body);
    } catch (e) {
      response.writeHead(502, { "content-type": "text/plain" });
      response.end(`the upload front could not forward: ${e.message}`);
    }
  });
  server.unref();  // the processes it fronts keep the script alive, not this
  return new Promise((resolve, reject) => {
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server));
  });
}

export async function startEverything({ startDelay = 0.5 } = {}) {
  assert.ok(envDir, "REX_DAYTONA_ENV must name the directory rex_daytona_env installed");
  const docs = path.join(envDir, "openapi");
  const apiDoc = path.join(docs, "daytona_api_client.json");
  const toolboxDocSource = path.join(docs, "daytona_toolbox_api_client.json");
  for (const f of [apiDoc, toolboxDocSource]) {
    assert.ok(fs.existsSync(f), `${f} is missing: run rex_daytona_env (scripts/common.sh)`);
  }
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "rex-daytona-check-"));
  const toolboxDoc = path.join(scratch, "toolbox.json");
  fs.writeFileSync(toolboxDoc, JSON.stringify(toolboxDocument(JSON.parse(fs.readFileSync(toolboxDocSource)))));
  const apiKey = `rex-check-${process.pid}`;
  const to = { prism: 0, fake: 0 };
  const front = await startUploadFront(to);
  const frontPort = front.address().port;
  const fake = start("fake", process.env.PYTHON || "python3", [
    path.join(here, "daytona_fake.py"), "--port", "0", "--api-key", apiKey, "--start-delay", String(startDelay),
    "--state-dir", path.join(scratch, "sandboxes"), "--toolbox-url", `http://127.0.0.1:${frontPort}/toolbox`]);
  await until("the fake", async () => /READY \d+/.test(fake.output), 30);
  const fakeUrl = `http://127.0.0.1:${fake.output.match(/READY (\d+)/)[1]}`;
  const api = await startPrism("prism (API)", apiDoc, fakeUrl, async (url) => (await fetch(`${url}/config`, quick())).status === 200);
  const toolbox = await startPrism("prism (toolbox)", toolboxDoc, fakeUrl, async (url) => (await fetch(`${url}/`, quick())).status === 404);
  Object.assign(to, { prism: toolbox.port, fake: Number(new URL(fakeUrl).port) });
  const apiUrl = `http://127.0.0.1:${api.port}`;
  const prisms = [api.prism, toolbox.prism];
  return { apiUrl, apiKey, fakeUrl, fake, prisms, front, scratch };
}

// Prism's complaints, less the expected ones: its readiness probe (GET / matches no path) and
// "Unable to match the returned status code" after the API answered 4xx.
export function violations(prism) {
  const out = [];
  let lastStatus = 0;
  for (const line of prism.output.split("\n")) {
    const returned = line.match(/has returned (\d{3})/);
    if (returned) lastStatus = Number(returned[1]);
    if (!/✖|⚠|[Vv]iolation/.test(line)) continue;
    if (/get \/ .*NO_PATH_MATCHED_ERROR/.test(line)) continue;
    if (/Unable to match the returned status code/.test(line) && lastStatus >= 400 && lastStatus < 500) continue;
    out.push(line.trim());
  }
  return out;
}


// --- Serving on its own ----------------------------------------------------------------------------

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const at = process.argv.indexOf("--start-delay");
  const setup = await startEverything({ startDelay: at > 0 ? Number(process.argv[at + 1]) : 0.5 });
  console.log(`READY api=${setup.apiUrl} key=${setup.apiKey} fake=${setup.fakeUrl}`);
  await new Promise((resolve) => {
    process.on("SIGTERM", resolve);
    process.on("SIGINT", resolve);
    process.stdin.on("end", resolve);
    process.stdin.on("close", resolve);
    process.stdin.resume();
  });
  await stopAll();
  const found = setup.prisms.flatMap((p) => violations(p).map((v) => `${p.name}: ${v}`));
  console.log(`VIOLATIONS ${found.length}`);
  for (const v of found) console.log(v);
  let failed = found.length > 0;
  if (setup.fake.exited.code !== 0) {
    console.log(`the fake exited with ${JSON.stringify(setup.fake.exited)}; its log:\n${setup.fake.output.slice(-4000)}`);
    failed = true;
  }
  fs.rmSync(setup.scratch, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
}
