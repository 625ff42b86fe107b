// E2B's JavaScript SDK, unchanged, running commands through the gateway's E2B-compatible
// in-sandbox API: output, exit codes and the SDK's CommandExitError, envs and cwd, the
// onStdout callback, a background command with wait().
//
//   E2B_API_URL=URL E2B_SANDBOX_URL=URL E2B_API_KEY=KEY REX_E2B_JS=DIR node commands.mjs
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.REX_E2B_JS;
assert.ok(sdkDir, "REX_E2B_JS must name the directory the SDK is installed in");
const require = createRequire(path.join(sdkDir, "package.json"));
const { Sandbox, CommandExitError } = await import(pathToFileURL(require.resolve("e2b")).href);

const sbx = await Sandbox.create({ envs: { FROM_CREATE: "c" } });
try {
  let r = await sbx.commands.run("echo out; echo err >&2; echo $FOO $FROM_CREATE", {
    envs: { FOO: "bar" },
  });
  assert.deepEqual([r.stdout, r.stderr, r.exitCode], ["out\nbar c\n", "err\n", 0]);
  r = await sbx.commands.run("pwd", { cwd: "/tmp" });
  assert.equal(r.stdout, "/tmp\n");
  await assert.rejects(sbx.commands.run("echo partial; exit 3"), (e) => {
    assert.ok(e instanceof CommandExitError, `${e}`);
    assert.equal(e.exitCode, 3);
    assert.equal(e.stdout, "partial\n");
    return true;
  });
  const seen = [];
  await sbx.commands.run("echo one; echo two", { onStdout: (d) => seen.push(d) });
  assert.equal(seen.join(""), "one\ntwo\n");
  const handle = await sbx.commands.run("sleep 0.2; echo late", { background: true });
  assert.ok(handle.pid > 0);
  assert.equal((await handle.wait()).stdout, "late\n");
  // A command has ended when its handle arrives: none is running, none can be killed.
  assert.deepEqual(await sbx.commands.list(), []);
  assert.equal(await sbx.commands.kill(handle.pid), false);
} finally {
  await sbx.kill();
}
console.log("ok: E2B JavaScript SDK commands");
