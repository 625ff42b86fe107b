#!/usr/bin/env python3
"""rex gateway's kubernetes provider against the local cluster (scripts/k8s.sh; the k8s.images
test has put this build's rex-server image and the bookworm test image into its containerd).

Usage: test_gateway_kubernetes.py PATH/TO/rex [unittest arguments]

- Sessions as pods: create, execute (Python state kept between calls), bash, files, destroy;
  the pod is gone after it. The pod's labels name the gateway and the session.
- kill -9 of the gateway: the pod runs on, the next gateway adopts it with its Python state.
- The same through the API server's pod proxy (connect: proxy), the gateway sending the
  kubeconfig's credentials.
- Drift: a pod deleted behind the gateway's back makes its session `lost`.
- An environment without an image fails the create and leaves nothing.

Every test deletes what it made, and fails when a pod of its gateway is left behind.
"""

import json
import os
import subprocess
import sys
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_gateway as tg  # noqa: E402
from gateway_process import wait_until  # noqa: E402

IMAGE = os.environ.get("REX_TEST_IMAGE", "rex-test-bookworm:latest")
KUBECONFIG = os.environ.get("REX_KUBECONFIG", "/var/lib/rex-k8s/admin.kubeconfig")
KUBECTL = os.environ.get("REX_KUBECTL", "/var/cache/rex-k8s/v1.34.4/bin/kubectl")
K8S = {"provider": "kubernetes", "environment": "Python3"}


def kubectl(*args, check=True):
    done = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def pods(selector):
    """Names of the pods of the default namespace matching a label selector."""
    out = kubectl("get", "pods", "-l", selector, "-o", "jsonpath={.items[*].metadata.name}")
    return out.split()


def pod(name):
    """The pod's object, or None when it does not exist."""
    done = subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "get", "pod", name, "-o", "json"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    return json.loads(done.stdout) if done.returncode == 0 else None


@unittest.skipUnless(os.path.exists(KUBECONFIG) and os.path.exists(KUBECTL),
                     f"no local cluster ({KUBECONFIG}): scripts/k8s.sh up starts one")
class KubernetesGatewayTestCase(tg.GatewayTestCase):
    """A gateway with the kubernetes provider on the local cluster, whose Python3 environment
    runs IMAGE; after each test, no pod of any of its gateways is left."""

    connect = "auto"

    def setUp(self):
        self.config = {"kubernetes": {"kubeconfig": KUBECONFIG, "image_pull_policy": "Never",
                                      "connect": self.connect},
                       **(self.extra_config or {})}
        self.gateway_args = ("--python-image", IMAGE, *self.extra_args)
        self.addCleanup(self.check_no_pods_left)
        super().setUp()

    extra_config = None
    extra_args = ()

    def check_no_pods_left(self):
        if not getattr(self, "gateway_id", None):
            return
        left = pods(f"rex.gateway={self.gateway_id}")
        for name in left:
            kubectl("delete", "pod", name, "--grace-period=0", "--force", check=False)
        self.assertEqual(left, [], "pods left behind")

    def flow(self):
        rec = self.create(K8S)
        sid, name = rec["session_id"], rec["sandbox_id"]
        self.assertEqual((rec["state"], rec["provider"]), ("ready", "kubernetes"), rec)
        labels = pod(name)["metadata"]["labels"]
        self.assertEqual(labels.get("rex.gateway"), self.gateway_id, labels)
        self.assertEqual(labels.get("rex.session"), sid, labels)

        out = self.execute(sid, "print('hello')\nx = 41")
        self.assertEqual((out["stdout"], out["results"]), ("hello\n", []), out)
        out = self.execute(sid, "import os, socket\n(x + 1, os.getcwd(), socket.gethostname())")
        self.assertEqual(out["results"],
                         [{"type": "text", "text": repr((42, rec["working_dir"], name))}], out)
        out = self.execute(sid, "cd /tmp && export A=1", "bash")
        out = self.execute(sid, "pwd; echo $A", "bash")
        self.assertEqual((out["stdout"], out["exit_code"]), ("/tmp\n1\n", 0), out)

        status, wrote = self.gw.json("POST", "/api/e2b/files",
                                     {"session_id": sid, "path": "hello.txt",
                                      "content": "hello from the host\n"})
        self.assertIn(status, (200, 201), wrote)
        out = self.execute(sid, "open('hello.txt').read()")
        self.assertEqual(out["results"], [{"type": "text", "text": repr("hello from the host\n")}],
                         out)
        return rec

    def destroy_and_check(self, sid, name):
        status, gone = self.gw.json("DELETE", f"/api/sessions/{sid}")
        self.assertEqual((status, gone["state"]), (200, "destroyed"), gone)
        self.assertIsNone(pod(name), "the pod outlived its session")
        self.assertEqual(kubectl("get", "secret", f"{name}-token", "--ignore-not-found"), "")


class TestKubernetesSessions(KubernetesGatewayTestCase):
    def test_a_session_is_a_pod_and_survives_a_kill9_of_the_gateway(self):
        rec = self.flow()
        sid, name = rec["session_id"], rec["sandbox_id"]
        self.assertFalse(rec["url"].startswith("https://"), rec)  # the node reaches the pod

        self.gw.kill9()
        self.assertEqual(pod(name)["status"]["phase"], "Running")
        self.gw = self.start_gateway()
        self.assertEqual(self.get(sid)["state"], "ready")
        out = self.execute(sid, "x")
        self.assertEqual(out["results"], [{"type": "text", "text": "41"}], out)
        self.assertEqual(pods(f"rex.session={sid}"), [name])
        self.destroy_and_check(sid, name)

    def test_an_environment_without_an_image_fails_and_leaves_nothing(self):
        status, err = self.gw.json("POST", "/api/sessions",
                                   {**K8S, "environment": "local"})
        self.assertError(status, err, 502, "sandbox.create_failed")
        self.assertIn("names no image", err["error"]["message"], err)
        self.assertEqual(pods(f"rex.gateway={self.gateway_id}"), [])


class TestKubernetesThroughTheProxy(KubernetesGatewayTestCase):
    connect = "proxy"

    def test_a_session_through_the_api_servers_pod_proxy(self):
        rec = self.flow()
        self.assertIn("/proxy", rec["url"], rec)
        self.assertTrue(rec["url"].startswith("https://"), rec)
        self.destroy_and_check(rec["session_id"], rec["sandbox_id"])


class TestKubernetesDrift(KubernetesGatewayTestCase):
    extra_config = {"drift_interval": 0.5, "sweep_interval": 0.1}

    def test_a_pod_deleted_behind_the_gateways_back_makes_its_session_lost(self):
        rec = self.create(K8S)
        sid = rec["session_id"]
        kubectl("delete", "pod", rec["sandbox_id"], "--grace-period=0", "--force")
        wait_until(lambda: self.get(sid)["state"] == "lost", 15, interval=0.1,
                   what=f"{sid} to be lost after its pod was deleted")


if __name__ == "__main__":
    tg.main()  # the rex executable from argv, a deadline, unittest
