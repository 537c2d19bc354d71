"""No pod can send traffic off this machine, and inside the cluster the network works.

Each cluster script drops, in the raw table of this machine (ahead of every rule kube-proxy and
CNI add), what its pods send off the machine, in a chain of its own (EGRESS_CHAIN):
hack/cluster.sh any packet from the pod range to an address outside the pod and service ranges,
hack/kind-cluster.sh any packet from kind's Docker network to an address outside it. Here a pod
of the project's image resolves the API server's Service name through CoreDNS, connects to it
through kube-proxy's Service address, and then tries 1.1.1.1: the connection must time out
(dropped here, not refused by anyone out there) and the drop rule's own counter must show the
packets. The rule is checked to be in place before the
pod sends anything, so a broken rule fails the test without a packet leaving.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from tests.support import cluster as node_cluster
from tests.support.kube import Kube

PROBE = """
import json, socket, time
report = {"dns": socket.gethostbyname("kubernetes.default.svc.cluster.local")}
with socket.create_connection((report["dns"], 443), timeout=5):
    report["api"] = "connected"
started = time.monotonic()
try:
    socket.create_connection(("1.1.1.1", 80), timeout=3).close()
    report["outside"] = "connected"
except OSError as error:
    report["outside"] = type(error).__name__
report["outside_seconds"] = round(time.monotonic() - started, 1)
print(json.dumps(report))
"""


def iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["iptables", *args], capture_output=True, text=True, timeout=30)


def dropped_packets(chain: str) -> int:
    listing = iptables("-t", "raw", "-L", chain, "-v", "-x", "-n")
    assert listing.returncode == 0, listing.stderr
    for line in listing.stdout.splitlines():
        if re.search(r"\bDROP\b", line):
            return int(line.split()[0])
    pytest.fail(f"no DROP rule in raw/{chain}:\n{listing.stdout}", pytrace=False)


def test_a_pod_reaches_the_api_server_by_name_and_nothing_outside(namespace: Kube) -> None:
    settings = node_cluster.settings()
    chain = settings["EGRESS_CHAIN"]
    rules = iptables("-t", "raw", "-S", "PREROUTING")
    assert rules.returncode == 0, rules.stderr
    jumps = [rule for rule in rules.stdout.splitlines() if rule.endswith(f"-j {chain}")]
    assert jumps, f"nothing in raw/PREROUTING jumps to {chain}; nothing sent:\n{rules.stdout}"
    before = dropped_packets(chain)

    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "probe",
                    "image": settings["OPERATOR_IMAGE"],
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", PROBE],
                }
            ],
        },
    }
    namespace.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    deadline = time.monotonic() + 90
    phase = ""
    while time.monotonic() < deadline and phase not in ("Succeeded", "Failed"):
        time.sleep(1)
        phase = namespace.kubectl("get", "pod", "probe", "-o", "jsonpath={.status.phase}").stdout
    output = namespace.kubectl("logs", "probe", check=False)
    assert phase == "Succeeded", f"probe {phase or 'never ran'}: {output.stdout}{output.stderr}"

    report = json.loads(output.stdout.strip().splitlines()[-1])
    assert report["dns"] == settings["API_SERVICE_IP"]
    assert report["api"] == "connected"
    assert report["outside"] == "TimeoutError", report  # dropped silently, not refused
    assert dropped_packets(chain) > before
