#!/usr/bin/env python3
"""rex gateway's docker and podman providers against the real engines (the docker_suite
fixture starts dockerd and Podman's API service and builds the rex-test-* images).

Usage: test_gateway_docker.py PATH/TO/rex [unittest arguments]

- The seed's curl flow on `docker`: create, get, execute (Python state kept between calls),
  files up and down, destroy; the container is gone after it.
- kill -9 of the gateway: the container is adopted with its Python state, and no second
  container is made for the session.
- Drift: a container removed behind the gateway's back makes its session `lost` (an event, the
  quota freed); a container labelled with this gateway's id and no record is removed after the
  grace period; containers of another gateway and of `rex run` are never touched.
- A network-less environment (its server on a unix socket), and the same flow on `podman`.

Every test removes what it made, and fails when a container of its gateway is left behind.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import unittest
import uuid

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway as tg  # noqa: E402
from gateway_process import wait_until  # noqa: E402

IMAGE = os.environ.get("REX_TEST_IMAGE", "rex-test-bookworm:latest")
DOCKER = {"provider": "docker", "environment": "Python3"}
PODMAN = {"provider": "podman", "environment": "Python3"}


def point_e2b_sdks_at(url, key):
    """E2B's SDKs, pointed at an E2B-compatible endpoint as their users do it: its control API
    and every sandbox's envd calls at `url`, with the API key `key`."""
    os.environ.update(E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=key)
    os.environ.pop("E2B_DOMAIN", None)
    os.environ.pop("E2B_DEBUG", None)


def engine(cli, *args, check=True):
    done = subprocess.run([cli, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"{cli} {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def containers(cli, *label_filters):
    """Ids of every container (running or not) with all these labels."""
    args = ["ps", "-a", "-q", "--no-trunc"]
    for f in label_filters:
        args += ["--filter", f"label={f}"]
    return [c for c in engine(cli, *args).split() if c]


def exists(cli, container):
    return subprocess.run([cli, "container", "inspect", container], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=60).returncode == 0


class ContainerGatewayTestCase(tg.GatewayTestCase):
    """A gateway whose Python3 environment runs IMAGE; after each test, no container of any of
    its gateways is left (the test fails if one was), and the template images its gateway built
    are removed with it."""

    gateway_args = ("--python-image", IMAGE)

    def setUp(self):
        # Registered first, so they run last (the images after the containers): after the base
        # class's cleanup has destroyed every session it could list and stopped the gateways.
        self.addCleanup(self.remove_template_images)
        self.addCleanup(self.check_no_containers_left)
        super().setUp()

    def remove_template_images(self):
        # A gateway keeps its templates' images across its restarts (its database names them);
        # a test's gateway goes for good with its storage, and its images go with it.
        if not getattr(self, "gateway_id", None):
            return
        for cli in ("docker", "podman"):
            refs = engine(cli, "images", "-q", "--filter", f"label=rex.gateway={self.gateway_id}",
                          "--filter", "label=rex.template", check=False)
            for ref in refs.split():
                engine(cli, "rmi", "-f", ref, check=False)

    def check_no_containers_left(self):
        if not getattr(self, "gateway_id", None):
            return  # no gateway started
        left = []
        for cli in ("docker", "podman"):
            for c in containers(cli, f"rex.gateway={self.gateway_id}"):
                left.append(f"{cli} {c[:12]}")
                engine(cli, "rm", "-f", c, check=False)
        self.assertEqual(left, [], "containers left behind")


@unittest.skipUnless(shutil.which("curl"), "curl is not installed")
class TestDockerSeedFlow(tg.CurlMixin, ContainerGatewayTestCase):
    """GATEWAY.md's curl examples with {"provider": "docker", "environment": "Python3"}."""

    def test_docker_seed_flow_and_adoption_after_kill9(self):
        url = self.gw.url
        status, rec = self.curl_json("-X", "POST", f"{url}/api/sessions", "-d", json.dumps(DOCKER))
        self.assertEqual(status, 201, rec)
        self.known_sids.add(rec["session_id"])
        self.assertRecord(rec)
        self.assertEqual((rec["state"], rec["provider"]), ("ready", "docker"), rec)
        sid, container = rec["session_id"], rec["sandbox_id"]
        labels = json.loads(engine("docker", "inspect", "--format", "{{json .Config.Labels}}",
                                   container))
        self.assertEqual(labels.get("rex.gateway"), self.gateway_id, labels)
        self.assertEqual(labels.get("rex.session"), sid, labels)
        self.assertEqual(engine("docker", "inspect", "--format", "{{.State.Running}}", container),
                         "true")

        status, got = self.curl_json(f"{url}/api/sessions/{sid}")
        self.assertEqual((status, got["state"]), (200, "ready"), got)

        def run(code, language=None):
            body = {"session_id": sid, "code": code}
            if language:
                body["language"] = language
            status, out = self.curl_json("-X", "POST", f"{url}/api/e2b/execute", "-d",
                                         json.dumps(body))
            self.assertEqual(status, 200, out)
            self.assertEqual(set(out), tg.EXECUTE_KEYS, out)
            self.assertIsNone(out["error"], out)
            return out

        out = run("print('hello')\nx = 41")
        self.assertEqual((out["stdout"], out["results"]), ("hello\n", []), out)
        out = run("x + 1")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)
        out = run("import os, socket\n(os.getcwd(), socket.gethostname())")
        self.assertEqual(out["results"],
                         [{"type": "text", "text": repr((rec["working_dir"], container[:12]))}],
                         out)
        out = run("cd /tmp && export A=1", "bash")
        out = run("pwd; echo $A; cat /etc/debian_version >/dev/null && echo in-image", "bash")
        self.assertEqual((out["stdout"], out["exit_code"]), ("/tmp\n1\nin-image\n", 0), out)
        # The sandbox's token is in no environment a process of the sandbox can read: the
        # container's first process is the server, which overwrote it.
        out = run("for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' <$e 2>/dev/null; done | "
                  "grep -c '^REX_AUTH_TOKEN=' || true", "bash")
        self.assertEqual(out["stdout"], "0\n", out)

        # Files: JSON and multipart up, bytes and a listing down, and inside the container.
        text = "hello from the host\n"
        status, wrote = self.curl_json("-X", "POST", f"{url}/api/e2b/files", "-d",
                                       json.dumps({"session_id": sid, "path": "hello.txt",
                                                   "content": text}))
        self.assertIn(status, (200, 201), wrote)
        self.assertEqual(wrote["path"], rec["working_dir"] + "/hello.txt", wrote)
        payload = os.path.join(self.tmp, "payload.bin")
        data = bytes(range(256)) * 64
        with open(payload, "wb") as f:
            f.write(data)
        status, wrote = self.curl_json("-F", f"session_id={sid}", "-F", "path=data/payload.bin",
                                       "-F", f"file=@{payload}", f"{url}/api/e2b/files")
        self.assertIn(status, (200, 201), wrote)
        self.assertEqual(wrote["size"], len(data), wrote)
        status, body = self.curl(f"{url}/api/e2b/files/{sid}?path=hello.txt")
        self.assertEqual((status, body), (200, text.encode()))
        status, body = self.curl(f"{url}/api/e2b/files/{sid}?path=data/payload.bin")
        self.assertEqual((status, body), (200, data))
        status, listing = self.curl_json(f"{url}/api/e2b/files/{sid}?path=.")
        self.assertEqual(status, 200, listing)
        names = {e["name"]: e["type"] for e in listing["entries"]}
        self.assertEqual(names, {"hello.txt": "file", "data": "dir"}, listing)
        out = run("open('hello.txt').read()")
        self.assertEqual(out["results"], [{"type": "text", "text": repr(text)}], out)
        status, err = self.curl_json(f"{url}/api/e2b/files/{sid}?path=missing.txt")
        self.assertError(status, err, 404, "files.not_found")

        # kill -9 of the gateway: the container runs on, the next gateway adopts it with its
        # Python state, and no second container exists for the session.
        self.gw.kill9()
        self.assertEqual(engine("docker", "inspect", "--format", "{{.State.Running}}", container),
                         "true")
        self.gw = self.start_gateway()
        self.assertEqual(self.get(sid)["state"], "ready")
        out = self.execute(sid, "x")
        self.assertEqual(out["results"], [{"type": "text", "text": "41"}], out)
        self.assertEqual(containers("docker", f"rex.session={sid}"), [container])

        status, gone = self.curl_json("-X", "DELETE", f"{self.gw.url}/api/sessions/{sid}")
        self.assertEqual((status, gone["state"], gone["reason"]), (200, "destroyed", "deleted"),
                         gone)
        self.assertFalse(exists("docker", container), "the container outlived its session")
        status, err = self.curl_json("-X", "POST", f"{self.gw.url}/api/e2b/execute", "-d",
                                     json.dumps({"session_id": sid, "code": "1"}))
        self.assertError(status, err, 410, "session.destroyed")

    def test_create_failures_leave_nothing(self):
        status, err = self.gw.json("POST", "/api/sessions",
                                   {**DOCKER, "environment": "local"})
        self.assertError(status, err, 502, "sandbox.create_failed")
        self.assertIn("names no image", err["error"]["message"], err)
        self.assertEqual([s["state"] for s in self.list_sessions()], ["failed"])
        self.assertEqual(containers("docker", f"rex.gateway={self.gateway_id}"), [])


class TestDockerImageMissing(ContainerGatewayTestCase):
    gateway_args = ("--python-image", "rex-no-such-image-" + uuid.uuid4().hex[:8] + ":latest")

    def test_an_image_that_cannot_be_had_fails_the_create_and_leaves_nothing(self):
        status, err = self.gw.json("POST", "/api/sessions", DOCKER)
        self.assertError(status, err, 502, "sandbox.create_failed")
        self.assertIn("rex-no-such-image", err["error"]["message"], err)
        listed = self.list_sessions()
        self.assertEqual([s["state"] for s in listed], ["failed"], listed)
        self.assertEqual(containers("docker", f"rex.gateway={self.gateway_id}"), [])


class TestDockerDrift(ContainerGatewayTestCase):
    config = {"orphan_grace": 2, "drift_interval": 0.5, "sweep_interval": 0.1}
    gateway_args = ("--python-image", IMAGE, "--max-sessions", "1")

    def foreign(self, labels):
        """A created (not started) container with these labels; removed at cleanup."""
        args = ["create", "--name", "rex-test-" + uuid.uuid4().hex[:10]]
        for k, v in labels.items():
            args += ["--label", f"{k}={v}"]
        cid = engine("docker", *args, IMAGE, "true")
        self.addCleanup(lambda: engine("docker", "rm", "-f", cid, check=False))
        return cid

    def test_removed_container_becomes_lost_and_frees_quota(self):
        rec = self.create(DOCKER)
        sid = rec["session_id"]
        status, data = self.gw.json("POST", "/api/sessions", DOCKER)
        self.assertError(status, data, 429, "quota.max_sessions")
        engine("docker", "rm", "-f", rec["sandbox_id"])
        wait_until(lambda: self.get(sid)["state"] == "lost", 10, interval=0.1,
                   what=f"{sid} to be lost after its container was removed")
        events = self.replay_events(0, until=lambda e: e["data"]["type"] == "lost"
                                    and e["data"]["session_id"] == sid, timeout=5)
        self.assertEqual(events[-1]["data"]["data"]["state"], "lost", events[-1])
        self.assertEqual(events[-1]["data"]["actor"], "reconciler", events[-1])
        new = self.create(DOCKER)  # the quota is free again
        out = self.execute(new["session_id"], "6 * 7")
        self.assertEqual(out["results"], [{"type": "text", "text": "42"}], out)

    def test_orphans_of_this_gateway_go_and_others_stay(self):
        mine = self.foreign({"rex.managed": "1", "rex.gateway": self.gateway_id,
                             "rex.session": "s" + uuid.uuid4().hex[:16]})
        other_gateway = self.foreign({"rex.managed": "1", "rex.gateway": "another-gateway",
                                      "rex.session": "s" + uuid.uuid4().hex[:16]})
        rex_run = self.foreign({"rex.managed": "1", "rex.deployment": uuid.uuid4().hex[:12],
                                "rex.owner.pid": str(os.getpid())})
        t0 = time.monotonic()
        wait_until(lambda: not exists("docker", mine), 15, interval=0.2,
                   what="the orphan container of this gateway to be removed")
        self.assertGreaterEqual(time.monotonic() - t0, 1.0, "removed before its grace period")
        time.sleep(2.0)  # several more drift checks
        self.assertTrue(exists("docker", other_gateway), "another gateway's container was removed")
        self.assertTrue(exists("docker", rex_run), "a container of rex run was removed")
        self.assertEqual(self.list_sessions(), [])


class TestNetworkless(ContainerGatewayTestCase):
    """An environment with `network: none`: the sandbox's server on a unix socket in a host
    directory, which goes with the container."""

    def setUp(self):
        self.registry = tg.tempfile.mkdtemp(prefix="gw-reg-")
        self.addCleanup(shutil.rmtree, self.registry, True)
        os.makedirs(os.path.join(self.registry, "environments"))
        with open(os.path.join(self.registry, "environments", "offline.yaml"), "w") as f:
            f.write(f"provider: docker\nimage: {IMAGE}\nnetwork: none\nworking_dir: /work\n"
                    "memory: 256m\nenv: {GREETING: hello}\n")
        self.gateway_args = ("--registry", self.registry)
        super().setUp()

    def test_offline_environment(self):
        rec = self.create({"environment": "offline", "provider": "docker"})
        sid = rec["session_id"]
        self.assertTrue(rec["url"].startswith("http+unix://"), rec)
        socket_dir = os.path.dirname(tg.urllib.parse.unquote(rec["url"][len("http+unix://"):]))
        self.assertTrue(os.path.isdir(socket_dir), rec)
        out = self.execute(sid, "import os\n(os.getcwd(), os.environ['GREETING'])")
        self.assertEqual(out["results"], [{"type": "text", "text": repr(("/work", "hello"))}], out)
        out = self.execute(sid, "ls /sys/class/net", "bash")
        self.assertEqual(out["stdout"].split(), ["lo"], out)
        memory = engine("docker", "inspect", "--format", "{{.HostConfig.Memory}}",
                        rec["sandbox_id"])
        self.assertEqual(memory, str(256 * 1024 * 1024))
        status, _ = self.gw.json("DELETE", f"/api/sessions/{sid}")
        self.assertEqual(status, 200)
        self.assertFalse(os.path.exists(socket_dir), "the socket directory outlived the sandbox")


class TestPodman(ContainerGatewayTestCase):

    def test_podman_session(self):
        rec = self.create(PODMAN)
        sid = rec["session_id"]
        self.assertEqual(rec["provider"], "podman")
        self.assertEqual(containers("podman", f"rex.session={sid}"), [rec["sandbox_id"]])
        self.execute(sid, "y = [1, 2, 3]")
        out = self.execute(sid, "sum(y)")
        self.assertEqual(out["results"], [{"type": "text", "text": "6"}], out)
        status, _ = self.gw.json("DELETE", f"/api/sessions/{sid}")
        self.assertEqual(status, 200)
        self.assertEqual(containers("podman", f"rex.session={sid}"), [])
        self.assertEqual(containers("docker", f"rex.session={sid}"), [])


def main():
    tg.main()  # the rex executable from argv, a deadline, unittest


if __name__ == "__main__":
    main()
