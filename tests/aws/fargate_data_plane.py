#!/usr/bin/env python3
"""What moto does not do for Fargate, in front of it: run the task's container, and give its
network interface an address this machine reaches.

usage: fargate_data_plane.py MOTO_URL LISTEN_PORT REX_SERVER SANDBOX_PORT STATE_FILE

Every request goes to moto as it came (signatures untouched: moto checks them) and moto's answer
comes back, with two additions:
- ECS RunTask that moto accepted: the sandbox container is "run" as a rex-server on an address
  of its own, 127.0.0.N:SANDBOX_PORT (the deployment's port), with the token the call put in the
  container's environment (REX_AUTH_TOKEN); ECS StopTask ends it.
- EC2 DescribeNetworkInterfaces: the interface of such a task gets an association whose public
  address is that 127.0.0.N.
- A task whose image names "fake-fail" is not run: DescribeTasks reports it STOPPED, its image
  not pulled, as Fargate reports an image it cannot pull.
STATE_FILE lists, as JSON lines, what happened ({"event": "run"|"stop", "task", "pid", "port",
"address"}),
for the tests to check.
"""
import http.client
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.parse
import xml.etree.ElementTree as ET

MOTO = urllib.parse.urlsplit(sys.argv[1])
PORT = int(sys.argv[2])
REX_SERVER = sys.argv[3]
SANDBOX_PORT = int(sys.argv[4])
STATE = sys.argv[5]
ECS_TARGET = "AmazonEC2ContainerServiceV20141113."

lock = threading.Lock()
tasks = {}  # task ARN -> rex-server process
failing_definitions = set()  # task definition ARNs and family:revision whose image is "fake-fail"
failed_tasks = set()  # task ARNs of those
addresses = {}  # network interface id -> the loopback address its task's server listens on


def note(**event):
    with lock, open(STATE, "a") as f:
        f.write(json.dumps(event) + "\n")


def moto_call(method, path, headers, body):
    conn = http.client.HTTPConnection(MOTO.hostname, MOTO.port, timeout=60)
    conn.request(method, path, body=body, headers=headers)
    answer = conn.getresponse()
    data = answer.read()
    conn.close()
    return answer.status, answer.getheaders(), data


def register_task_definition(request, answer):
    images = [c.get("image", "") for c in request.get("containerDefinitions", [])]
    if any("fake-fail" in image for image in images):
        d = json.loads(answer).get("taskDefinition", {})
        with lock:
            failing_definitions.add(d.get("taskDefinitionArn", ""))
            failing_definitions.add(f"{d.get('family', '')}:{d.get('revision', '')}")


def run_task(request, answer):
    if request.get("taskDefinition", "") in failing_definitions:
        with lock:
            failed_tasks.update(t["taskArn"] for t in json.loads(answer).get("tasks", []))
        return
    token = None
    for override in request.get("overrides", {}).get("containerOverrides", []):
        for pair in override.get("environment", []):
            if pair.get("name") == "REX_AUTH_TOKEN":
                token = pair["value"]
    port = SANDBOX_PORT
    for task in json.loads(answer).get("tasks", []):
        eni = ""
        for attachment in task.get("attachments", []):
            for detail in attachment.get("details", []):
                if detail.get("name") == "networkInterfaceId":
                    eni = detail["value"]
        with lock:
            address = f"127.0.0.{2 + len(addresses) % 250}"
            addresses[eni] = address
        env = dict(os.environ, REX_AUTH_TOKEN=token or "")
        proc = subprocess.Popen([REX_SERVER, "--host", address, "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with lock:
            tasks[task["taskArn"]] = proc
        note(event="run", task=task["taskArn"], pid=proc.pid, port=port, address=address)


def stop_task(request):
    arn = request.get("task", "")
    with lock:
        matches = [a for a in tasks if a == arn or a.endswith("/" + arn)]
        procs = [(a, tasks.pop(a)) for a in matches]
    for a, proc in procs:
        proc.terminate()
        proc.wait()
        note(event="stop", task=a, pid=proc.pid)


def with_failed_tasks(body):
    answer = json.loads(body)
    for task in answer.get("tasks", []):
        if task.get("taskArn") in failed_tasks and task.get("lastStatus") != "STOPPED":
            task["lastStatus"] = task["desiredStatus"] = "STOPPED"
            task["stopCode"] = "TaskFailedToStart"
            task["stoppedReason"] = ("CannotPullContainerError: fake-fail: the image is not "
                                     "there")
    return json.dumps(answer).encode()


def with_public_ip(body):
    root = ET.fromstring(body)
    ns = root.tag[1:root.tag.index("}")] if root.tag.startswith("{") else ""
    q = f"{{{ns}}}" if ns else ""
    ET.register_namespace("", ns)
    changed = False
    for item in root.findall(f"{q}networkInterfaceSet/{q}item"):
        with lock:
            address = addresses.get(item.findtext(f"{q}networkInterfaceId"))
        if address and item.find(f"{q}association") is None:
            association = ET.SubElement(item, f"{q}association")
            ET.SubElement(association, f"{q}publicIp").text = address
            ET.SubElement(association, f"{q}ipOwnerId").text = "amazon"
            changed = True
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) if changed else body


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.relay()

    def do_POST(self):
        self.relay()

    def relay(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
        status, answer_headers, data = moto_call(self.command, self.path, headers, body)
        target = self.headers.get("X-Amz-Target", "")
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace")) if not target else {}
        if status == 200 and target == ECS_TARGET + "RegisterTaskDefinition":
            register_task_definition(json.loads(body or b"{}"), data)
        elif status == 200 and target == ECS_TARGET + "RunTask":
            run_task(json.loads(body or b"{}"), data)
        elif status == 200 and target == ECS_TARGET + "DescribeTasks" and failed_tasks:
            data = with_failed_tasks(data)
        elif status == 200 and target == ECS_TARGET + "StopTask":
            stop_task(json.loads(body or b"{}"))
        elif status == 200 and form.get("Action") == ["DescribeNetworkInterfaces"]:
            data = with_public_ip(data)
        self.send_response(status)
        for name, value in answer_headers:
            if name.lower() not in ("content-length", "transfer-encoding", "connection", "server",
                                    "date"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler)

    def stop(*_):
        with lock:
            procs = list(tasks.values())
        for proc in procs:
            proc.terminate()
        threading.Thread(target=server.shutdown).start()

    signal.signal(signal.SIGTERM, stop)
    print("listening", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
