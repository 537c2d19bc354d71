"""``helm upgrade`` to a chart whose AgentRun CRD gained a field: the field is served afterwards.

The chart is installed, then a copy of it whose CRD has one more spec field (``e2eNote``, a
string) and a new chart version is applied with ``helm upgrade``, as a user upgrades to a
release that added a field. The API server must then serve the field: a server-side dry run of
an AgentRun that sets it, under kubectl's strict field validation, is accepted and answers the
field back (a field the served schema lacks is refused, or pruned without strict validation).
Afterwards ``helm rollback`` restores the release's first chart.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from tests.support.cluster import CHART, OperatorRelease, adopt_crd, install_operator
from tests.support.kube import Kube, helm_binary

CRD_NAME = "agentruns.agentrun.dev"
FIELD = "e2eNote"


def test_helm_upgrade_serves_the_field_the_new_crd_added(namespace: Kube, tmp_path: Path) -> None:
    adopt_crd(namespace, "agentrun")  # this release manages the CRD (crds.enabled, the default)
    release = install_operator(
        namespace, "agentrun", tmp_path / "demo", values={"crds": {"enabled": True}}
    )
    try:
        newer = chart_with_new_field(tmp_path / "chart")
        namespace.helm(
            helm_binary(), "upgrade", release.name, str(newer), *release.helm_args,
            "--wait", "--timeout=150s",
        )  # fmt: skip
        deadline = time.monotonic() + 30  # the API server serves a changed CRD in seconds
        while (refusal := refused(release)) and time.monotonic() < deadline:
            time.sleep(1)
        assert not refusal, (
            f"after helm upgrade the API server does not serve spec.{FIELD}: the CRD in the "
            f"cluster was not updated (its spec fields: {served_spec_fields(namespace)}); "
            f"creating a run with the field: {refusal}"
        )
    finally:
        namespace.helm(helm_binary(), "rollback", release.name, "1", "--wait", check=False)
        release.uninstall()


def chart_with_new_field(folder: Path) -> Path:
    """A copy of the chart whose every copy of the AgentRun CRD has spec.e2eNote, at a new
    chart version."""
    shutil.copytree(CHART, folder)
    changed = []
    for path in sorted(folder.rglob("*.yaml")):
        try:
            document = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            continue  # a template, not a manifest
        if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
            continue
        if document["metadata"]["name"] != CRD_NAME:
            continue
        for version in document["spec"]["versions"]:
            spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
            spec["properties"][FIELD] = {"type": "string", "description": "Added by the e2e test."}
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        changed.append(path)
    assert changed, f"the chart carries no {CRD_NAME} to change"
    chart = yaml.safe_load((folder / "Chart.yaml").read_text())
    chart["version"] = f"{chart['version']}-crdfield"
    (folder / "Chart.yaml").write_text(yaml.safe_dump(chart, sort_keys=False))
    return folder


def refused(release: OperatorRelease) -> str:
    """Why a server-side dry run of an AgentRun setting the field (kubectl's strict field
    validation) did not answer the field back; empty once it does."""
    manifest = {
        "apiVersion": "agentrun.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": "with-new-field"},
        "spec": {"agent": "booking", "input": "x", "suspend": True, FIELD: "kept"},
    }
    answer = release.kube.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(manifest),
        check=False,
    )  # fmt: skip
    if answer.returncode != 0:
        return answer.stderr.strip()
    created: dict[str, Any] = json.loads(answer.stdout)
    return "" if created["spec"].get(FIELD) == "kept" else f"pruned: {created['spec']}"


def served_spec_fields(kube: Kube) -> list[str]:
    crd = json.loads(kube.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    version = crd["spec"]["versions"][0]
    return sorted(version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])
