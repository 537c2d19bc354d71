"""The operator's ``SecretResolver``: Kubernetes Secrets in the run's (or Agent's) namespace.

A declared agent names its key and its tools' tokens as ``valueFrom.secretKeyRef``; this reads
the Secret from the API server at each request that needs it — so a rotated key is used from the
next request on — and hands the value to that request only. Nothing here keeps it: not a cache,
not an attribute, not a log line. What fails is said with the reference (``name/key``), never
with a value.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from agentrun.operator.kubeapi import KubeApi
from agentrun.runner.secrets import SecretKeyRef, SecretUnavailableError


@dataclass(frozen=True)
class KubeSecrets:
    api: KubeApi
    namespace: str

    async def resolve(self, ref: SecretKeyRef) -> str:
        try:
            data = await self.api.secret_data(self.namespace, ref.name)
        except Exception as error:  # the API server away, or access denied: say which, not more
            raise SecretUnavailableError(
                ref,
                f"the API server did not give Secret {self.namespace}/{ref.name} "
                f"({type(error).__name__}{_status(error)})",
            ) from None
        if data is None:
            raise SecretUnavailableError(ref, f"namespace {self.namespace} has no such Secret")
        if ref.key not in data:
            raise SecretUnavailableError(
                ref,
                f"Secret {self.namespace}/{ref.name} has no key {ref.key!r} "
                f"(it has: {', '.join(sorted(data)) or 'none'})",
            )
        try:
            return base64.b64decode(data[ref.key], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise SecretUnavailableError(ref, "its value is not UTF-8 text") from None


def _status(error: Exception) -> str:
    status = getattr(error, "status", None)
    return f" {status}" if status else ""
