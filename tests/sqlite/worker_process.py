"""Drives one ``worker.py`` process: start it, send it commands, read its answers, kill it."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

WORKER = Path(__file__).with_name("worker.py")
ANSWER_WITHIN = 60.0


class WorkerProcess:
    def __init__(self, url: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.answer() == {"ready": True}

    def send(self, command: dict[str, Any]) -> None:
        stdin = self._pipe(self.process.stdin)
        stdin.write(json.dumps(command) + "\n")
        stdin.flush()

    def answer(self) -> dict[str, Any]:
        stdout = self._pipe(self.process.stdout)
        ready, _, _ = select.select([stdout], [], [], ANSWER_WITHIN)
        line = stdout.readline() if ready else ""
        if not line:
            self.kill()
            raise AssertionError(
                f"worker gave no answer within {ANSWER_WITHIN}s; stderr:\n"
                f"{self._pipe(self.process.stderr).read()}"
            )
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        self.send(command)
        return self.answer()

    def sigkill(self) -> int:
        """SIGKILL the worker, as a crash would, and return its exit status."""
        self.process.send_signal(signal.SIGKILL)
        return self.process.wait(timeout=ANSWER_WITHIN)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=ANSWER_WITHIN)
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()

    @staticmethod
    def _pipe(pipe: IO[str] | None) -> IO[str]:
        assert pipe is not None
        return pipe
