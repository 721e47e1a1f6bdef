"""`memfed serve` as a real process on a loopback port, for end-to-end tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def memfed_command() -> list[str]:
    script = Path(sys.executable).parent / "memfed"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gateway.cli"]


class ServeProcess:
    def __init__(self, data_dir: Path, *, admin_key: str | None = None, config: Path | None = None,
                 env: dict[str, str] | None = None, wait: bool = True, ready_seconds: float = 90.0) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        command = [*memfed_command(), "serve", "--host", "127.0.0.1", "--port", str(self.port),
                   "--data-dir", str(data_dir)]
        if config is not None:
            command += ["--config", str(config)]
        environment = {k: v for k, v in os.environ.items() if k != "MEMFED_ADMIN_KEY"}
        if admin_key:
            environment["MEMFED_ADMIN_KEY"] = admin_key
        environment.update(env or {})
        self.log = data_dir.parent / f"serve-{self.port}.log"
        self._log_file = self.log.open("wb")
        self.process = subprocess.Popen(command, stdout=self._log_file, stderr=subprocess.STDOUT,
                                        env=environment)
        if wait:
            self.wait_ready(ready_seconds)

    def wait_ready(self, seconds: float = 90.0) -> None:
        """Return once the gateway answers `GET /v1/uhp` (it does once its state is loaded)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"memfed serve exited: {self.output()}")
            try:
                if httpx.get(self.base_url + "/v1/uhp", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"memfed serve did not start: {self.output()}")

    def output(self) -> str:
        if not self._log_file.closed:
            self._log_file.flush()
        return self.log.read_text(errors="replace")

    def stop(self, kill: bool = False) -> None:
        if self.process.poll() is None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log_file.close()
