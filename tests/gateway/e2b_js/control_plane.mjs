// E2B's JavaScript SDK (pinned in package.json and package-lock.json), unchanged, against a
// running rex gateway's E2B-compatible control API: create, getInfo, list with a metadata filter
// and paging, setTimeout, connect, kill, and another key's sandboxes kept apart.
//
//   E2B_API_URL=http://127.0.0.1:PORT E2B_API_KEY=KEY_A REX_E2B_KEY_B=KEY_B \
//   REX_E2B_JS=DIR node control_plane.mjs
//
// REX_E2B_JS: where `npm ci` installed the SDK (scripts/common.sh: rex_e2b_js_env). Exits 0 when
// every check passes; a failed check throws, naming what it expected.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.REX_E2B_JS;
assert.ok(sdkDir, "REX_E2B_JS must name the directory the SDK is installed in");
const require = createRequire(path.join(sdkDir, "package.json"));
const { Sandbox, NotFoundError } = await import(pathToFileURL(require.resolve("e2b")).href);
const keyB = process.env.REX_E2B_KEY_B;

const tag = `js-${Date.now()}`;
const secondsLeft = (info) => (info.endAt.getTime() - Date.now()) / 1000;

// create, getInfo, setTimeout, connect
const sbx = await Sandbox.create({ metadata: { tag, n: "1" }, envs: { GREETING: "hi" }, timeoutMs: 120_000 });
let info = await sbx.getInfo();
assert.equal(info.sandboxId, sbx.sandboxId);
assert.equal(info.templateId, "local");
assert.deepEqual(info.metadata, { tag, n: "1" });
assert.ok(secondsLeft(info) > 100 && secondsLeft(info) <= 121, `endAt ${info.endAt}`);
await sbx.setTimeout(600_000);
info = await Sandbox.getInfo(sbx.sandboxId);
assert.ok(secondsLeft(info) > 590 && secondsLeft(info) <= 601, `endAt after setTimeout ${info.endAt}`);
const again = await Sandbox.connect(sbx.sandboxId);
assert.equal(again.sandboxId, sbx.sandboxId);

// list: the metadata filter, then pages of one
const second = await Sandbox.create({ metadata: { tag, n: "2" } });
const ids = async (paginator) => {
  const found = [];
  while (paginator.hasNext) found.push(...(await paginator.nextItems()).map((s) => s.sandboxId));
  return found;
};
assert.deepEqual((await ids(Sandbox.list({ query: { metadata: { tag } } }))).sort(),
                 [sbx.sandboxId, second.sandboxId].sort());
assert.deepEqual(await ids(Sandbox.list({ query: { metadata: { tag, n: "2" } } })), [second.sandboxId]);
const paged = Sandbox.list({ query: { metadata: { tag } }, limit: 1 });
const first = await paged.nextItems();
assert.equal(first.length, 1);
assert.ok(paged.hasNext, "a page of one of two has a next page");
assert.equal((await ids(paged)).length, 1);

// another key sees none of it
if (keyB) {
  assert.deepEqual(await ids(Sandbox.list({ apiKey: keyB, query: { metadata: { tag } } })), []);
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: keyB }), NotFoundError);
  assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey: keyB }), false);
}

// kill: true, then false; a killed sandbox is not found
assert.equal(await Sandbox.kill(sbx.sandboxId), true);
assert.equal(await Sandbox.kill(sbx.sandboxId), false);
await assert.rejects(Sandbox.getInfo(sbx.sandboxId), NotFoundError);
await second.kill();
assert.deepEqual(await ids(Sandbox.list({ query: { metadata: { tag } } })), []);

// an unknown template is refused
await assert.rejects(Sandbox.create("no-such-template"), /no-such-template/);
console.log("ok: E2B JavaScript SDK control plane");
