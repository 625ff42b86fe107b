// E2B's JavaScript SDK, unchanged, running commands through the gateway's E2B-compatible
// in-sandbox API: output, exit codes and the SDK's CommandExitError, envs and cwd, output
// streamed as it is produced, and background commands that run on: wait(), list(),
// sendStdin() with closeStdin(), connect() and kill().
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
  // Output arrives as it is produced, not when the command ends.
  const stamped = [];
  await sbx.commands.run("echo first; sleep 1; echo second", {
    onStdout: (d) => stamped.push([performance.now(), d]),
  });
  assert.equal(stamped.map(([, d]) => d).join(""), "first\nsecond\n");
  const at = (word) => stamped.find(([, d]) => d.includes(word))[0];
  assert.ok(at("second") - at("first") > 700, JSON.stringify(stamped));
  // Background commands run on in the sandbox.
  const handle = await sbx.commands.run("sleep 0.2; echo late", { background: true });
  assert.ok(handle.pid > 0);
  assert.equal((await handle.wait()).stdout, "late\n");
  const cat = await sbx.commands.run("cat", { background: true, stdin: true });
  const listed = await sbx.commands.list();
  const entry = listed.find((p) => p.pid === cat.pid);
  assert.ok(entry, JSON.stringify(listed));
  assert.deepEqual([entry.cmd, entry.args], ["/bin/bash", ["-l", "-c", "cat"]]);
  await sbx.commands.sendStdin(cat.pid, "fed\n");
  await sbx.commands.closeStdin(cat.pid);
  assert.equal((await cat.wait()).stdout, "fed\n");
  const slow = await sbx.commands.run("sleep 0.6; echo from-slow", { background: true });
  const again = await sbx.commands.connect(slow.pid);
  assert.equal((await again.wait()).stdout, "from-slow\n");
  const sleeper = await sbx.commands.run("sleep 30", { background: true });
  assert.equal(await sbx.commands.kill(sleeper.pid), true);
  await assert.rejects(sleeper.wait(), (e) => {
    assert.ok(e instanceof CommandExitError, `${e}`);
    assert.equal(e.exitCode, -1);
    assert.equal(e.error, "signal: killed");
    return true;
  });
  assert.equal(await sbx.commands.kill(sleeper.pid), false);
  assert.deepEqual(await sbx.commands.list(), []);
} finally {
  await sbx.kill();
}
console.log("ok: E2B JavaScript SDK commands");
