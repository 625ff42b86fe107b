#!/usr/bin/env python3
"""E2B's Python SDK (pinned in tests/swerex/requirements.txt), unchanged, building templates on a
rex gateway whose sandboxes are containers: Template.build of steps (ENV, COPY, RUN as root and
as a user, WORKDIR, USER, a start command with its ready command) and of a Dockerfile, from the
project's local image; Sandbox.create of the template; the second build of the same steps taken
from the cache; concurrent builds of one name made once; a failing step, a missing base image
and a bad request reported as the SDK reports E2B's; aliases; deletion.

Usage: PYTHON test_e2b_templates.py PATH/TO/rex [unittest arguments]
(PYTHON: one with the `e2b` package; without it the test exits 77, skipped, saying why.)
"""

import http.client
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway_docker as tgd  # noqa: E402

try:
    from e2b import Sandbox, Template, wait_for_file
    from e2b.exceptions import BuildException
except ImportError as e:  # pragma: no cover - the environment decides
    print(f"skipped: E2B's Python SDK is not installed in {sys.executable}: {e}")
    sys.exit(77)

KEY = "e2b-tpl-" + uuid.uuid4().hex[:8]
OTHER_KEY = "e2b-tpl-other-" + uuid.uuid4().hex[:8]


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Templates(tgd.ContainerGatewayTestCase):
    tenant_keys = {"team-a": KEY, "team-b": OTHER_KEY}
    default_key = KEY

    def setUp(self):
        super().setUp()
        tgd.point_e2b_sdks_at(self.gw.url, KEY)
        self.context = tempfile.TemporaryDirectory()
        self.addCleanup(self.context.cleanup)
        app = os.path.join(self.context.name, "app")
        os.makedirs(app)
        with open(os.path.join(app, "hello.txt"), "w") as f:
            f.write("hello from the context\n")
        with open(os.path.join(app, "run.sh"), "w") as f:
            f.write("#!/bin/sh\necho run-ok\n")
        os.chmod(os.path.join(app, "run.sh"), 0o755)

    def sandbox(self, template, **kwargs):
        sbx = Sandbox.create(template, timeout=300, **kwargs)
        self.known_sids.add(sbx.sandbox_id)
        return sbx

    def steps(self, marker):
        return (Template(file_context_path=self.context.name)
                .from_image(tgd.IMAGE)
                .set_envs({"GREETING": "hello world", "MARKER": marker})
                .copy("app", "/opt/app/")
                .run_cmd("echo built-as-$(whoami) > /opt/built.txt")
                .run_cmd("whoami > /home/user/whoami.txt", user="user")
                .set_workdir("/opt/app")
                .set_user("user")
                .set_start_cmd("touch /tmp/started-by-$(whoami); exec sleep 100000",
                               wait_for_file("/tmp/started-by-user")))

    def test_build_create_cache_and_delete(self):
        name = unique("tpl")
        logs = []
        info = Template.build(self.steps(name), name, on_build_logs=logs.append)
        self.assertEqual(info.name, name)
        messages = "\n".join(str(entry.message) for entry in logs)
        self.assertIn("Step", messages)  # the engine's own build output reached the SDK
        self.assertTrue(Template.exists(name))
        self.assertFalse(Template.exists(unique("absent")))

        sbx = self.sandbox(name)
        out = sbx.commands.run(
            "cat hello.txt; echo $GREETING; pwd; cat /opt/built.txt; cat /home/user/whoami.txt; "
            "./run.sh; ls /tmp/started-by-user", user="root")
        self.assertEqual(out.exit_code, 0, out)
        self.assertEqual(out.stdout.split("\n")[:7],
                         ["hello from the context", "hello world", "/opt/app", "built-as-root",
                          "user", "run-ok", "/tmp/started-by-user"], out.stdout)
        # Commands run as the template's user unless they name another (Harbor names root).
        self.assertEqual(sbx.commands.run("whoami; pwd").stdout, "user\n/opt/app\n")
        self.assertEqual(sbx.commands.run("whoami", user="root").stdout, "root\n")
        # Files are the template's user's too, unless the call names another.
        sbx.files.write("/home/user/mine.txt", "x")
        sbx.files.write("/opt/theirs.txt", "x", user="root")
        owners = sbx.commands.run("stat -c %U /home/user/mine.txt /opt/theirs.txt").stdout
        self.assertEqual(owners, "user\nroot\n")
        sbx.kill()

        # The gateway's own API starts one by the template's name too.
        status, rec = self.gw.json("POST", "/api/sessions", {"environment": name})
        self.assertEqual(status, 201, rec)
        self.known_sids.add(rec["session_id"])
        status, out = self.gw.json("POST", f"/api/sessions/{rec['session_id']}/execute",
                                   {"code": "cat /opt/built.txt; whoami", "language": "bash"})
        self.assertEqual(status, 200, out)
        self.assertEqual(out["stdout"], "built-as-root\nroot\n", out)  # its own API: root
        self.gw.json("DELETE", f"/api/sessions/{rec['session_id']}")

        # The same steps again: the cache's image, no new build.
        logs = []
        Template.build(self.steps(name), name, on_build_logs=logs.append)
        messages = "\n".join(str(entry.message) for entry in logs)
        self.assertIn("CACHED", messages)
        self.assertNotIn("Step 2/", messages)

        # Another team cannot see it, or take its name.
        req = urllib.request.Request(f"{self.gw.url}/templates/aliases/{name}",
                                     headers={"X-API-Key": OTHER_KEY})
        with self.assertRaises(urllib.error.HTTPError) as cm:
            urllib.request.urlopen(req, timeout=30)
        self.assertEqual(cm.exception.code, 403)
        self.assertIn("another team", json.loads(cm.exception.read())["message"])

        # Tags: another for the build, a sandbox of a tag, the tags listed and removed.
        info = Template.assign_tags(name, ["stable"])
        self.assertEqual(info.tags, ["stable"])
        self.assertEqual(sorted(t.tag for t in Template.get_tags(name)), ["default", "stable"])
        tagged = self.sandbox(f"{name}:stable")
        self.assertEqual(tagged.commands.run("cat /opt/built.txt").stdout, "built-as-root\n")
        tagged.kill()
        Template.remove_tags(name, ["stable"])
        self.assertEqual([t.tag for t in Template.get_tags(name)], ["default"])
        with self.assertRaises(Exception):
            self.sandbox(f"{name}:stable")

        # Another team cannot start it by its id through either API.
        template_id = self.api("GET", f"/templates/aliases/{name}")[1]["templateID"]
        status, body = self.api("POST", "/sandboxes", {"templateID": template_id}, key=OTHER_KEY)
        self.assertEqual(status, 400, body)
        status, body = self.gw.json("POST", "/api/sessions", {"environment": template_id},
                                    headers={"Authorization": f"Bearer {OTHER_KEY}"})
        self.assertEqual(status, 422, body)

        # Deleted: its name is free and sandboxes of it can no longer be made.
        req = urllib.request.Request(f"{self.gw.url}/templates/{name}", method="DELETE",
                                     headers={"X-API-Key": KEY})
        with urllib.request.urlopen(req, timeout=60) as r:
            self.assertEqual(r.status, 204)
        self.assertFalse(Template.exists(name))
        with self.assertRaises(Exception):
            self.sandbox(name)
        status, body = self.api("POST", "/sandboxes", {"templateID": template_id})
        self.assertEqual(status, 400, body)

    def test_dockerfile_template(self):
        name = unique("dockerfile")
        dockerfile = (f"FROM {tgd.IMAGE}\n"
                      "ENV APP_HOME=/srv/app\n"
                      "WORKDIR /srv/app\n"
                      "COPY app/hello.txt ./\n"
                      "RUN echo from-dockerfile > made.txt\n")
        t = Template(file_context_path=self.context.name).from_dockerfile(dockerfile)
        Template.build(t, name)
        sbx = self.sandbox(name)
        out = sbx.commands.run("cat /srv/app/hello.txt /srv/app/made.txt; echo $APP_HOME",
                               user="root")
        self.assertEqual(out.stdout.split("\n")[:3],
                         ["hello from the context", "from-dockerfile", "/srv/app"], out.stdout)
        sbx.kill()

    def test_concurrent_builds_of_one_name_build_once(self):
        name = unique("together")
        t = (Template().from_image(tgd.IMAGE)
             .run_cmd(f"sleep 2; echo {name} > /opt/once.txt"))
        results, errors, logs = [], [], [[], []]

        def build(i):
            try:
                results.append(Template.build(t, name, on_build_logs=logs[i].append))
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=build, args=(i,)) for i in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=240)
        self.assertEqual(errors, [])
        self.assertEqual(len(results), 2)
        texts = ["\n".join(str(e.message) for e in entries) for entries in logs]
        waited = [("waiting for build" in x) or ("CACHED" in x) for x in texts]
        self.assertEqual(sorted(waited), [False, True], texts)

    def test_failures_are_reported_as_e2b_does(self):
        # A failing step: its number and the engine's words, nothing made.
        bad = Template().from_image(tgd.IMAGE).run_cmd("true").run_cmd(
            "echo about-to-fail; exit 3")
        with self.assertRaises(BuildException) as cm:
            Template.build(bad, unique("failing"))
        self.assertIn("step 2 failed", str(cm.exception))
        self.assertIn("3", str(cm.exception))
        # A base image the engine does not have (no registry is reached).
        missing = Template().from_image("rex-no-such-image:never").run_cmd("true")
        with self.assertRaises(BuildException) as cm:
            Template.build(missing, unique("nobase"))
        self.assertIn("rex-no-such-image:never", str(cm.exception))
        self.assertIn("not on the engine", str(cm.exception))
        # A template that never finished a build cannot start a sandbox.
        with self.assertRaises(Exception) as cm:
            self.sandbox(unique("never-built"))
        # The gateway serves on.
        self.assertTrue(Template.exists(unique("x")) is False)


    def test_template_images_no_template_records_go_at_start(self):
        name = unique("kept")
        Template.build(Template().from_image(tgd.IMAGE).run_cmd("echo kept > /kept"), name)
        # An image of this gateway's templates that no template records (as a build the
        # gateway was killed in leaves): removed when the gateway starts again; the recorded
        # one stays and still starts sandboxes.
        orphan = f"rex-orphan-{uuid.uuid4().hex[:8]}:1"
        made = subprocess.run(
            ["docker", "build", "-q", "-t", orphan, "--label", "rex.template=gone",
             "--label", f"rex.gateway={self.gateway_id}", "-"],
            input=f"FROM {tgd.IMAGE}\nLABEL built=orphan\n", capture_output=True, text=True,
            timeout=120)
        self.assertEqual(made.returncode, 0, made.stderr)
        # A sandbox of a tagged build, from before the restart: its template's user still
        # applies after it (the tag's environment is known again at start).
        Template.assign_tags(name, ["stable"])
        tagged = self.sandbox(f"{name}:stable")
        self.gw.kill9()
        self.gw = self.start_gateway()
        tgd.point_e2b_sdks_at(self.gw.url, KEY)
        tagged = Sandbox.connect(tagged.sandbox_id)
        self.assertEqual(tagged.commands.run("whoami").stdout, "user\n")
        tagged.kill()
        deadline = time.monotonic() + 30
        while tgd.engine("docker", "images", "-q", orphan) and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(tgd.engine("docker", "images", "-q", orphan), "", "the orphan stayed")
        sbx = self.sandbox(name)
        self.assertEqual(sbx.commands.run("cat /kept").stdout, "kept\n")
        sbx.kill()

    def test_a_base_tagged_anew_is_built_anew(self):
        # The cache knows a base by its image, not its name: the same steps on a tag that now
        # names another image build again, on that image.
        base = f"rex-tpl-base-{uuid.uuid4().hex[:8]}:1"
        # The templates' images first: the base is their parent.
        self.addCleanup(lambda: (self.remove_template_images(),
                                 tgd.engine("docker", "rmi", "-f", base, check=False)))
        tgd.engine("docker", "tag", tgd.IMAGE, base)
        steps = lambda: Template().from_image(base).run_cmd("cat /marker 2>/dev/null; true")
        name = unique("rebased")
        Template.build(steps(), name)
        made = subprocess.run(["docker", "build", "-q", "-t", base, "-"],
                              input=f"FROM {tgd.IMAGE}\nRUN echo second > /marker\n",
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(made.returncode, 0, made.stderr)
        logs = []
        Template.build(steps(), name, on_build_logs=logs.append)
        self.assertNotIn("CACHED", "\n".join(str(e.message) for e in logs))
        sbx = self.sandbox(name)
        self.assertEqual(sbx.commands.run("cat /marker").stdout, "second\n")
        sbx.kill()

    def api(self, method, path, body=None, key=KEY, raw=None, headers=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"X-API-Key": key, **(headers or {})}
        if body is not None:
            h["Content-Type"] = "application/json"
        url = path if path.startswith("http") else f"{self.gw.url}{path}"
        req = urllib.request.Request(url, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                text = r.read()
                return r.status, json.loads(text) if text.strip() else None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    @staticmethod
    def tar_of(files):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    def test_uploads_are_checked(self):
        status, made = self.api("POST", "/v3/templates", {"name": unique("uploads")})
        self.assertEqual(status, 202, made)
        tid, bid = made["templateID"], made["buildID"]
        fake = "ab" * 32
        status, link = self.api("GET", f"/templates/{tid}/files/{fake}")
        self.assertEqual((status, link["present"]), (201, False), link)

        # Not a tar: refused, nothing kept.
        status, body = self.api("PUT", link["url"], raw=b"not an archive", key="")
        self.assertEqual(status, 400, body)
        self.assertIn("not a tar archive", body["message"])
        # Larger than the limit, by its Content-Length: refused before its body.
        conn = http.client.HTTPConnection("127.0.0.1", self.gw.port, timeout=30)
        conn.putrequest("PUT", urllib.parse.urlsplit(link["url"]).path)
        conn.putheader("Content-Length", str(3 << 30))
        conn.endheaders()
        answer = conn.getresponse()
        self.assertEqual(answer.status, 413)
        self.assertIn("larger than", json.loads(answer.read())["message"])
        conn.close()

        # A COPY step whose hash names no upload: refused at once.
        step = {"type": "COPY", "args": ["data.txt", "/opt/", "", ""], "filesHash": fake,
                "force": False}
        build = {"fromImage": tgd.IMAGE, "steps": [step]}
        status, body = self.api("POST", f"/v2/templates/{tid}/builds/{bid}", build)
        self.assertEqual(status, 400, body)
        self.assertIn("were not uploaded", body["message"])

        # An upload whose files are not those of its hash: the build fails at that step.
        status, _ = self.api("PUT", link["url"], raw=self.tar_of({"data.txt": b"other\n"}), key="")
        self.assertEqual(status, 200)
        status, link = self.api("GET", f"/templates/{tid}/files/{fake}")
        self.assertEqual(link, {"present": True})
        status, body = self.api("POST", f"/v2/templates/{tid}/builds/{bid}", build)
        self.assertEqual(status, 202, body)
        deadline = time.monotonic() + 60
        while True:
            status, st = self.api("GET", f"/templates/{tid}/builds/{bid}/status")
            if st["status"] not in ("waiting", "building") or time.monotonic() > deadline:
                break
        self.assertEqual(st["status"], "error", st)
        self.assertEqual(st["reason"]["step"], "1", st)
        self.assertIn("holds other files", st["reason"]["message"])

        # Another team's uploads are not seen, nor its template.
        status, body = self.api("GET", f"/templates/{tid}/files/{fake}", key=OTHER_KEY)
        self.assertEqual(status, 404, body)
        status, made = self.api("POST", "/v3/templates", {"name": unique("theirs")}, key=OTHER_KEY)
        status, link = self.api("GET", f"/templates/{made['templateID']}/files/{fake}",
                                key=OTHER_KEY)
        self.assertEqual((status, link["present"]), (201, False), link)


class OnPodmanAlone(tgd.ContainerGatewayTestCase):
    """A gateway whose Docker engine is out of reach builds templates on Podman."""
    tenant_keys = {"team-a": KEY}
    default_key = KEY
    config = {"docker_engine": "unix:///nonexistent/docker.sock"}

    def setUp(self):
        super().setUp()
        tgd.point_e2b_sdks_at(self.gw.url, KEY)

    def test_build_and_start_on_podman(self):
        name = unique("podman")
        t = (Template().from_image(tgd.IMAGE).set_envs({"WHERE": "podman"})
             .run_cmd("echo built > /built.txt"))
        Template.build(t, name)
        sbx = Sandbox.create(name, timeout=300)
        self.known_sids.add(sbx.sandbox_id)
        self.assertEqual(sbx.commands.run("cat /built.txt; echo $WHERE; whoami").stdout,
                         "built\npodman\nuser\n")
        self.assertEqual(self.get(sbx.sandbox_id)["provider"], "podman")
        sbx.kill()

if __name__ == "__main__":
    tgd.tg.main()
