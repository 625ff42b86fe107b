// E2B's JavaScript code-interpreter SDK (@e2b/code-interpreter), unchanged, against
// src/gateway/notebook_kernel.py's `http` mode: state across cells, streamed output, errors,
// rich results, matplotlib, contexts, bash, envs, a timeout that keeps the context's state.
// The SDK reaches a sandbox's port 49999 at the connection's sandboxUrl when that is set, so a
// Sandbox made with it and no control plane talks to the server.
//
//   REX_CI_URL=http://127.0.0.1:PORT REX_E2B_JS=DIR node code_interpreter.mjs
// Without REX_CI_URL, the sandbox is Sandbox.create()'s (E2B_API_URL and E2B_SANDBOX_URL naming a
// rex gateway: its code-interpreter-v1 environment), killed at the end.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.REX_E2B_JS;
const url = process.env.REX_CI_URL;
assert.ok(sdkDir, "REX_E2B_JS must name the directory the SDK is installed in");
const require = createRequire(path.join(sdkDir, "package.json"));
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const { Sandbox } = await load("@e2b/code-interpreter");
const { NotFoundError, SandboxError, TimeoutError } = await load("e2b");

// apiUrl: on connection errors the SDK asks the control plane whether the sandbox still runs;
// nothing listens there, so it cannot, and reports the original error.
const sbx = url
  ? new Sandbox({ sandboxId: "rex-local", sandboxUrl: url, apiUrl: "http://127.0.0.1:9",
                  apiKey: "e2b_unused", envdVersion: "0.4.0" })
  : await Sandbox.create({ timeoutMs: 300_000 });

// State across cells, the last expression, the execution count.
const first = await sbx.runCode("x = 41");
assert.equal(first.error, undefined);
const second = await sbx.runCode("x += 1\nx");
assert.equal(second.text, "42");
assert.equal(second.executionCount, first.executionCount + 1);
assert.deepEqual(second.results.map((r) => r.isMainResult), [true]);

// Output streams line by line while the cell runs: the cell prints its second line only once
// this side has seen the first (a file that another context makes when the first line arrives).
const heard = `/tmp/rex-heard-${process.pid}-${Date.now()}`;
const helper = await sbx.createCodeContext();
const stamped = [];
let told;
const streamed = await sbx.runCode(
  "import os, sys, time\nprint('first')\nprint('warn', file=sys.stderr)\n" +
    `for _ in range(600):\n    if os.path.exists(${JSON.stringify(heard)}): break\n` +
    "    time.sleep(0.05)\n" +
    `print('second' if os.path.exists(${JSON.stringify(heard)}) else 'not streamed')`,
  { onStdout: (m) => {
      stamped.push(m.line);
      if (m.line === "first\n")
        told = sbx.runCode(`open(${JSON.stringify(heard)}, 'w').close()`, { context: helper });
    } });
await told;
assert.deepEqual(stamped, ["first\n", "second\n"]);
assert.deepEqual(streamed.logs, { stdout: ["first\n", "second\n"], stderr: ["warn\n"] });

// An exception: name, value, traceback; the state stays.
const errors = [];
const failed = await sbx.runCode("def f():\n    return 1 / 0\nf()",
                                 { onError: (e) => errors.push(e) });
assert.equal(failed.error.name, "ZeroDivisionError");
assert.equal(failed.error.value, "division by zero");
assert.match(failed.error.traceback, /^Traceback \(most recent call last\):/);
assert.match(failed.error.traceback, /return 1 \/ 0/);
assert.equal(errors.length, 1);
assert.equal((await sbx.runCode("x")).text, "42");

// Rich results and display().
await sbx.runCode(
  "class Rich:\n" +
  "    def __repr__(self): return 'Rich()'\n" +
  "    def _repr_html_(self): return '<b>rich</b>'\n" +
  "    def _repr_markdown_(self): return '**rich**'\n" +
  "    def _repr_json_(self): return {'rich': [1, 2]}\n");
const rich = await sbx.runCode("display(Rich())\nRich()");
assert.deepEqual(rich.results.map((r) => [r.text, r.html, r.markdown, r.json, r.isMainResult]), [
  ["Rich()", "<b>rich</b>", "**rich**", { rich: [1, 2] }, false],
  ["Rich()", "<b>rich</b>", "**rich**", { rich: [1, 2] }, true],
]);

// matplotlib: a PNG result (the kernel's python must have matplotlib).
const probe = await sbx.runCode("import matplotlib");
assert.equal(probe.error, undefined,
  `matplotlib is not importable by the kernel's python: ${probe.error?.value}`);
const plot = await sbx.runCode("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()");
assert.equal(plot.results.length, 1);
assert.ok(Buffer.from(plot.results[0].png, "base64").subarray(0, 4).equals(
  Buffer.from([0x89, 0x50, 0x4e, 0x47])), "a PNG");
assert.match(plot.results[0].text, /^<Figure size/);

// Contexts: create, list, restart, remove.
const ctx = await sbx.createCodeContext({ language: "python", cwd: "/" });
assert.deepEqual([ctx.language, ctx.cwd], ["python", "/"]);
assert.equal((await sbx.listCodeContexts()).at(-1).id, ctx.id);
assert.equal((await sbx.runCode("import os; os.getcwd()", { context: ctx })).text, "/");
await sbx.runCode("z = 1", { context: ctx });
await sbx.restartCodeContext(ctx);
assert.equal((await sbx.runCode("z", { context: ctx })).error.name, "NameError");
await sbx.removeCodeContext(ctx.id);
assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id));
await assert.rejects(sbx.runCode("1", { context: ctx }), (e) => e instanceof NotFoundError);

// Bash: a persistent shell, exit codes as errors; envs for one execution.
const bash = await sbx.runCode("cd /\necho one\nfalse", { language: "bash" });
assert.deepEqual(bash.logs.stdout, ["one\n"]);
assert.equal(bash.error.value, "1");
assert.deepEqual((await sbx.runCode("pwd; echo $FOO", { language: "bash", envs: { FOO: "bar" } }))
  .logs.stdout, ["/\n", "bar\n"]);
assert.deepEqual((await sbx.runCode("echo ${FOO:-default}", { language: "bash" })).logs.stdout,
  ["default\n"]);
assert.equal((await sbx.runCode("import os; os.getenv('FOO')", { envs: { FOO: "py" } })).text,
             "py");

// A timeout: the SDK's TimeoutError; the cell is interrupted and the context keeps its state.
await sbx.runCode("kept = 'still here'");
await assert.rejects(sbx.runCode("import time; time.sleep(100)", { timeoutMs: 2000 }),
  (e) => e instanceof TimeoutError);
assert.equal((await sbx.runCode("kept", { timeoutMs: 20000 })).text, "still here");

// Output that is not UTF-8 is replaced, not fatal.
const raw = await sbx.runCode("import sys; sys.stdout.buffer.write(b'\\xff\\xfe ok\\n')");
assert.deepEqual(raw.logs.stdout, ["\ufffd\ufffd ok\n"]);

// Another language: refused by status (the SDK shows the body only in its CI diagnostics).
await assert.rejects(sbx.runCode("console.log(1)", { language: "js" }),
  (e) => e instanceof SandboxError && /400/.test(e.message));

if (!url)
  await sbx.kill();
console.log("ok: E2B JavaScript code-interpreter SDK");
// runCode leaves its request timer (60 s) armed when it throws on a status: do not wait for it.
process.exit(0);
