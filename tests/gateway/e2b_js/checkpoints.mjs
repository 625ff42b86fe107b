// E2B's JavaScript SDK (pinned in package.json and package-lock.json), unchanged, against a rex
// gateway, on the provider of REX_E2B_TEMPLATE: pause keeping memory and not, resume through connect,
// snapshots (create, list, delete, Sandbox.create from one), fork with a count (of a running and
// of a paused sandbox), and metrics.
//
//   E2B_API_URL=http://127.0.0.1:PORT E2B_SANDBOX_URL=$E2B_API_URL E2B_API_KEY=KEY \
//   REX_E2B_TEMPLATE=Python3 REX_E2B_JS=DIR node checkpoints.mjs
//
// Exits 0 when every check passes; a failed check throws, naming what it expected.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.REX_E2B_JS;
assert.ok(sdkDir, "REX_E2B_JS must name the directory the SDK is installed in");
const require = createRequire(path.join(sdkDir, "package.json"));
const { Sandbox } = await import(pathToFileURL(require.resolve("e2b")).href);
const template = process.env.REX_E2B_TEMPLATE;
assert.ok(template, "REX_E2B_TEMPLATE must name a template whose provider checkpoints");

let sbx = await Sandbox.create(template, { timeoutMs: 300_000 });
await sbx.files.write("state.txt", "base");
const sleeper = await sbx.commands.run("sleep 600", { background: true });

const metrics = await sbx.getMetrics();
assert.equal(metrics.length, 1, JSON.stringify(metrics));
assert.ok(metrics[0].cpuCount > 0 && metrics[0].memUsed > 0, JSON.stringify(metrics));

// Snapshots.
const snap = await sbx.createSnapshot({ name: "js-step" });
assert.ok(snap.snapshotId.startsWith("ckpt-"), JSON.stringify(snap));
const listed = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems();
assert.deepEqual(listed.map((s) => s.snapshotId), [snap.snapshotId]);
const child = await Sandbox.create(snap.snapshotId);
assert.equal(await child.files.read("state.txt"), "base");
await child.kill();
assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false);

// Forks of a running sandbox.
const forks = await sbx.fork({ count: 2 });
assert.equal(forks.length, 2);
for (const f of forks) {
  assert.ok(!(f instanceof Error), String(f));
  assert.equal(await f.files.read("state.txt"), "base");
}
await forks[0].files.write("state.txt", "fork0");
assert.equal(await forks[1].files.read("state.txt"), "base");
await Promise.all(forks.map((f) => f.kill()));

// Pause keeping memory; a fork of the paused sandbox; connect resumes it, the same processes.
assert.equal(await sbx.pause(), true);
assert.equal(await sbx.pause(), false);
assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, "paused");
const [pausedFork] = await Sandbox.fork(sbx.sandboxId, { count: 1 });
assert.ok(!(pausedFork instanceof Error), String(pausedFork));
assert.equal(await pausedFork.files.read("state.txt"), "base");
await pausedFork.kill();
sbx = await Sandbox.connect(sbx.sandboxId);
assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, "running");
assert.ok((await sbx.commands.list()).some((p) => p.pid === sleeper.pid), "the process survived");

// Pause without memory: the files come back, the processes do not.
assert.equal(await sbx.pause({ keepMemory: false }), true);
sbx = await Sandbox.connect(sbx.sandboxId);
assert.equal(await sbx.files.read("state.txt"), "base");
assert.ok(!(await sbx.commands.list()).some((p) => p.pid === sleeper.pid), "a process came back");
await sbx.kill();
assert.deepEqual(await Sandbox.listSnapshots().nextItems(), []);

console.log("ok: E2B JavaScript SDK checkpoints");
