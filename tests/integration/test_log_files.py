"""The broker's log files as Kafka's: server.log, controller.log and state-change.log in $LOG_DIR, rotated
by size; -daemon detaches, writes to the files only and appends; per-component levels."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.broker import ROOT, BrokerProcess
from tests.helpers.topics import create_topic
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


def _all(log_dir: Path, name: str) -> str:
    """A log and its rotated backups, oldest first."""
    files = sorted(log_dir.glob(name + "*"), key=lambda p: -int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0)
    return "".join(p.read_text() for p in files)


def test_files_per_component_rotated_by_size(broker_factory):
    b = broker_factory(start=False)
    b.env = {"PYKBROKER_LOG_FILE_MAX_BYTES": "1024", "PYKBROKER_LOG_FILE_BACKUPS": "3"}
    b.start()
    create_topic(b.bootstrap, "logged", partitions=1)
    wait_until(lambda: "Leader logged-0" in (b.log_dir / "state-change.log").read_text(), message="state change")
    assert "INFO [Broker id=1] Leader logged-0 with topic id" in (b.log_dir / "state-change.log").read_text()
    assert "INFO [QuorumController id=1] Becoming the active controller" in _all(b.log_dir, "controller.log")
    server = _all(b.log_dir, "server.log")
    assert "INFO [KafkaRaftServer nodeId=1] Kafka Server started" in server
    assert "QuorumController" not in server and "Leader logged-0" not in server
    names = sorted(p.name for p in b.log_dir.glob("server.log*"))
    assert "server.log.1" in names and len(names) <= 4, names  # rotated, at most 3 backups
    assert all((b.log_dir / n).stat().st_size <= 1024 for n in names)
    # The console (stdout) still carries every line, as before.
    assert "Becoming the active controller" in b.output() and "Kafka Server started" in b.output()


def test_levels_per_component_and_package(broker_factory):
    b = broker_factory(start=False)
    b.env = {"PYKBROKER_LOG_LEVEL": "info,LogManager=warn,pykbroker.metadata=warn"}
    b.start()
    out = b.output()
    assert "Kafka Server started" in out
    assert "INFO [LogManager" not in out and "INFO [QuorumController" not in out, out
    assert "INFO [LogManager" not in (b.log_dir / "server.log").read_text()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _start_daemon(b: BrokerProcess) -> int:
    b.write_config()
    env = dict(os.environ, PYTHONPATH=str(ROOT), LOG_DIR=str(b.log_dir))
    r = subprocess.run(
        [sys.executable, "-m", "pykbroker.kafka", "-daemon", str(b.config_path)],
        env=env,
        cwd=str(b.data_dir),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r
    return int((b.log_dir / "kafkaServer.pid").read_text())


def _stop(pid: int) -> None:
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)
        wait_until(lambda: not _alive(pid), 20, message=f"daemon {pid} exited")


def test_daemon_detaches_writes_files_only_and_appends(tmp_path):
    b = BrokerProcess(tmp_path / "d")
    pids: list[int] = []
    try:
        for run in (1, 2):
            pid = _start_daemon(b)
            pids.append(pid)
            wait_until(
                lambda n=run: _all(b.log_dir, "server.log").count("Kafka Server started") == n, 30, message="started"
            )
            assert os.getsid(pid) == pid  # its own session: no terminal to hang it up
            _stop(pid)
        server = _all(b.log_dir, "server.log")
        assert server.count("Kafka Server started") == 2 and server.count("shut down completed") == 2
        assert "Becoming the active controller" in (b.log_dir / "controller.log").read_text()
        # stdout and stderr of the daemon go to kafkaServer.out: no log line there (files only)
        assert "Kafka Server started" not in (b.log_dir / "kafkaServer.out").read_text()
        assert pids[0] != pids[1]
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
