// E2B's JavaScript SDK (e2b), unchanged, building a template on a rex gateway and starting a
// sandbox of it: steps (ENV, COPY of a file uploaded by its hash, RUN as root and as the user,
// WORKDIR, USER, a start command with its ready command), the second build from the cache, a
// failing step reported as the SDK reports E2B's.
//
//   E2B_API_URL=URL E2B_SANDBOX_URL=URL E2B_API_KEY=KEY REX_E2B_JS=DIR REX_E2B_IMAGE=IMAGE \
//     REX_E2B_CONTEXT=DIR node templates.mjs
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const require = createRequire(path.join(process.env.REX_E2B_JS, "package.json"));
const { Sandbox, Template, waitForFile, BuildError } =
  await import(pathToFileURL(require.resolve("e2b")).href);
const image = process.env.REX_E2B_IMAGE;
const name = `js-tpl-${Math.random().toString(16).slice(2, 10)}`;

const recipe = () =>
  Template({ fileContextPath: process.env.REX_E2B_CONTEXT })
    .fromImage(image)
    .setEnvs({ GREETING: "hello from js" })
    .copy("app/hello.txt", "/opt/app/")
    .runCmd("echo built-as-$(whoami) > /opt/built.txt")
    .runCmd("whoami > /home/user/whoami.txt", { user: "user" })
    .setWorkdir("/opt/app")
    .setUser("user")
    .setStartCmd("touch /tmp/started-by-$(whoami); exec sleep 100000",
                 waitForFile("/tmp/started-by-user"));

const logs = [];
await Template.build(recipe(), name, { onBuildLogs: (e) => logs.push(String(e.message)) });
assert.ok(logs.some((m) => m.startsWith("Step")), logs.join("\n"));
assert.equal(await Template.exists(name), true);

const sbx = await Sandbox.create(name, { timeoutMs: 300_000 });
const out = await sbx.commands.run(
  "cat hello.txt; echo $GREETING; pwd; cat /opt/built.txt /home/user/whoami.txt; whoami");
assert.deepEqual(out.stdout.split("\n").slice(0, 6),
                 ["hello from the context", "hello from js", "/opt/app", "built-as-root", "user",
                  "user"]);
assert.equal((await sbx.commands.run("whoami", { user: "root" })).stdout, "root\n");
await sbx.kill();

const again = [];
await Template.build(recipe(), name, { onBuildLogs: (e) => again.push(String(e.message)) });
assert.ok(again.some((m) => m.includes("CACHED")), again.join("\n"));

await assert.rejects(
  Template.build(Template().fromImage(image).runCmd("exit 7"), `${name}-bad`),
  (e) => e instanceof BuildError && /step 1 failed/.test(e.message) && /7/.test(e.message));

const removed = await fetch(`${process.env.E2B_API_URL}/templates/${name}`,
                            { method: "DELETE", headers: { "X-API-Key": process.env.E2B_API_KEY } });
assert.equal(removed.status, 204);
console.log("ok: E2B JavaScript SDK templates");
