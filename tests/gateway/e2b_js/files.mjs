// E2B's JavaScript SDK, unchanged, reading and writing a sandbox's files through the gateway's
// E2B-compatible in-sandbox API (E2B_SANDBOX_URL): write, read as text and bytes, list, exists,
// getInfo, makeDir, rename, remove, and the SDK's not-found error.
//
//   E2B_API_URL=URL E2B_SANDBOX_URL=URL E2B_API_KEY=KEY REX_E2B_JS=DIR node files.mjs
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const sdkDir = process.env.REX_E2B_JS;
assert.ok(sdkDir, "REX_E2B_JS must name the directory the SDK is installed in");
const require = createRequire(path.join(sdkDir, "package.json"));
const { Sandbox, NotFoundError } = await import(pathToFileURL(require.resolve("e2b")).href);

const sbx = await Sandbox.create();
try {
  const written = await sbx.files.write("notes/hello.txt", "hello from js\n");
  assert.equal(written.name, "hello.txt");
  assert.ok(written.path.endsWith("/notes/hello.txt"), written.path);
  assert.equal(await sbx.files.read("notes/hello.txt"), "hello from js\n");

  const blob = new Uint8Array(1 << 20).map((_, i) => i % 251);
  await sbx.files.write("blob.bin", blob.buffer);
  const back = await sbx.files.read("blob.bin", { format: "bytes" });
  assert.equal(back.length, blob.length);
  assert.ok(back.every((b, i) => b === blob[i]), "the bytes read back differ");

  const names = (await sbx.files.list(".")).map((e) => `${e.name}:${e.type}`).sort();
  assert.deepEqual(names, ["blob.bin:file", "notes:dir"]);
  assert.equal(await sbx.files.exists("notes/hello.txt"), true);
  assert.equal(await sbx.files.exists("notes/none.txt"), false);
  const info = await sbx.files.getInfo("blob.bin");
  assert.equal(info.size, blob.length);

  assert.equal(await sbx.files.makeDir("a/b"), true);
  assert.equal(await sbx.files.makeDir("a/b"), false);
  const moved = await sbx.files.rename("notes/hello.txt", "a/b/moved.txt");
  assert.ok(moved.path.endsWith("/a/b/moved.txt"), moved.path);
  assert.equal(await sbx.files.read("a/b/moved.txt"), "hello from js\n");
  await sbx.files.remove("a");
  assert.equal(await sbx.files.exists("a"), false);
  await assert.rejects(sbx.files.read("a/b/moved.txt"), NotFoundError);
} finally {
  await sbx.kill();
}
console.log("ok: E2B JavaScript SDK files");
