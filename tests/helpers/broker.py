"""A real pykbroker broker in a subprocess on 127.0.0.1, for integration tests.

``BrokerProcess(tmp_path, **overrides).start()`` writes a server.properties with ephemeral ports,
starts ``python -m pykbroker.kafka``, waits (bounded) for "Kafka Server started", and learns each
listener's port from the broker's own "Awaiting socket connections" lines. The broker's log files
(``server.log``, ...) go to ``log_dir`` (``$LOG_DIR``: ``<data_dir>/server-logs``); ``env`` adds
environment variables. ``stop()`` sends SIGTERM
(orderly), ``kill()`` sends SIGKILL. Only the process this object started is ever signalled.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_AWAITING = re.compile(r"Awaiting socket connections on ([^ ]+):(\d+)\. \(.*listener=(\w+)")

DEFAULTS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:0",
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
}


class BrokerProcess:
    def __init__(self, data_dir: Path, **overrides: str):
        self.data_dir = Path(data_dir)
        self.props = dict(DEFAULTS)
        self.props["log.dirs"] = str(self.data_dir / "logs")
        self.props.update({k.replace("_", "."): str(v) for k, v in overrides.items()})
        self.log_dir = self.data_dir / "server-logs"
        self.env: dict[str, str] = {}
        #: the source tree the broker runs from (its PYTHONPATH); benchmarks set another to compare two trees
        self.tree: Path = ROOT
        self.proc: subprocess.Popen | None = None
        self._terminated: subprocess.Popen | None = None  # the process SIGTERM was sent to
        self.ports: dict[str, int] = {}
        self.lines: list[str] = []
        self._started = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def config_path(self) -> Path:
        return self.data_dir / "server.properties"

    def write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))

    def start(self, timeout: float = 30.0, extra_args: list[str] | None = None) -> BrokerProcess:
        self.write_config()
        self.ports.clear()
        self._started.clear()
        env = dict(os.environ, PYTHONPATH=str(self.tree), PYTHONUNBUFFERED="1", LOG_DIR=str(self.log_dir), **self.env)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pykbroker.kafka", str(self.config_path), *(extra_args or [])],
            cwd=str(self.data_dir),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read_output, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout
        while not self._started.wait(0.1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                out = "\n".join(self.lines[-50:])
                self.kill()
                raise RuntimeError(f"broker did not start (exit={self.proc.returncode}):\n{out}")
        return self

    def _read_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            m = _AWAITING.search(line)
            if m:
                self.ports[m.group(3)] = int(m.group(2))
            if "Kafka Server started" in line:
                self._started.set()

    @property
    def port(self) -> int:
        return self.ports["PLAINTEXT"]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, pattern: str, timeout: float = 10.0, start: int = 0) -> str | None:
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines[start:]:
                if rx.search(line):
                    return line
            time.sleep(0.05)
        return None

    def begin_stop(self) -> None:
        """Send SIGTERM (an orderly shutdown) once if the process runs, without waiting; ``stop()`` then waits."""
        if self.proc is not None and self.proc.poll() is None and self._terminated is not self.proc:
            self._terminated = self.proc
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (unless ``begin_stop`` sent it already) and wait up to ``timeout`` s for the exit code;
        killed (and TimeoutExpired raised) if it does not exit in time."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.begin_stop()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, timeout: float = 30.0) -> BrokerProcess:
        self.stop()
        return self.start(timeout)
