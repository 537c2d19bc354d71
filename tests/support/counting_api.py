"""A ``KubeApi`` that lists the requests it makes, for tests that hold the operator to a number
of requests against a real API server."""

from __future__ import annotations

from typing import Any

from kubernetes.config import new_client_from_config

from agentrun.operator._kubeapi import KubeApi, Lane
from tests.support.kube import Kube


class CountingApi(KubeApi):
    def __init__(self, kube: Kube) -> None:
        # The client's loader is untyped; it returns an ApiClient.
        super().__init__(new_client_from_config(config_file=str(kube.kubeconfig)))  # type: ignore[no-untyped-call]
        self.requests: list[str] = []

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.requests.append("GET")
        return await super().get(namespace, name)

    async def patch_status(
        self,
        namespace: str,
        name: str,
        operations: list[dict[str, Any]],
        lane: Lane = Lane.OTHER,
    ) -> dict[str, Any]:
        self.requests.append("PATCH")
        return await super().patch_status(namespace, name, operations, lane)

    async def patch_object(
        self, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        self.requests.append("PATCH")
        return await super().patch_object(namespace, name, operations)
