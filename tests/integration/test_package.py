"""Acceptance: the package as a user gets it. ``pip install <checkout>`` (a wheel, not editable) into a fresh
virtualenv, then the user's own tests with the ``kafka_broker`` / ``kafka_topic`` fixtures and
confluent-kafka, and the ``kafka-server-start`` command, all from that virtualenv (no PYTHONPATH).

The virtualenv is built once for the module (without a pip of its own: the test interpreter's pip installs
into it with ``--python``); pip fetches the dependencies through its own cache. The
checkout is copied first (without .git, .venv, data, logs) so that building the wheel writes nothing into
it. Select with ``-m package`` (also marked ``slow``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers.broker import DEFAULTS, ROOT
from tests.helpers.wait import wait_until

# About 70 s, most of it pip installing into the new virtualenv: marked slow.
pytestmark = [pytest.mark.integration, pytest.mark.package, pytest.mark.slow]

COMMANDS = (
    "kafka-server-start",
    "kafka-server-stop",
    "kafka-storage",
    "kafka-topics",
    "kafka-console-producer",
    "kafka-console-consumer",
    "kafka-consumer-groups",
    "kafka-producer-perf-test",
    "kafka-delete-records",
    "kafka-configs",
    "kafka-get-offsets",
    "kafka-broker-api-versions",
    "kafka-dump-log",
    "kafka-consumer-perf-test",
    "kafka-verifiable-producer",
    "kafka-verifiable-consumer",
    "kafka-log-dirs",
    "kafka-metadata-quorum",
    "kafka-transactions",
    "kafka-acls",
    "kafka-features",
    "kafka-delegation-tokens",
)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LOG_DIR", "VIRTUAL_ENV")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONUNBUFFERED="1", **extra)
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("package")
    source = base / "checkout"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "data", "logs", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "spark"
        ),
    )
    venv = base / "venv"
    # Without pip of its own (ensurepip costs 5-20 s): this interpreter's pip installs into it (pip --python).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", str(source)]
        + ["confluent-kafka", "pytest"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return venv


def test_installed_as_a_wheel_with_every_command(venv):
    r = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import pykbroker, sys; print(pykbroker.__file__)"],
        env=_env(),
        cwd=str(venv),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout.startswith(str(venv)) and "site-packages" in r.stdout, r
    missing = [c for c in COMMANDS if not os.access(venv / "bin" / c, os.X_OK)]
    assert missing == []
    topics = subprocess.run(
        [str(venv / "bin" / "kafka-topics"), "--help"], env=_env(), capture_output=True, text=True, timeout=60
    )
    assert topics.returncode == 0 and "--bootstrap-server" in topics.stdout


USER_TESTS = """
import pykbroker
from confluent_kafka import Consumer, Producer


def test_round_trip(kafka_broker, kafka_topic):
    assert "site-packages" in pykbroker.__file__
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(3):
        producer.produce(kafka_topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(10) == 0
    consumer = Consumer(
        {"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([kafka_topic])
    values = []
    for _ in range(60):
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            values.append(m.value())
        if len(values) == 3:
            break
    consumer.close()
    assert values == [b"v0", b"v1", b"v2"]


def test_another_topic(kafka_broker, kafka_topic):
    assert kafka_topic.startswith("test_another_topic-")
"""


def test_user_tests_with_the_fixtures_pass(venv, tmp_path):
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    r = subprocess.run(
        [str(venv / "bin" / "pytest"), "-q", "-p", "no:cacheprovider"],
        cwd=str(tmp_path),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr


class _Started:
    """A broker command we started: its output read on a thread, "Kafka Server started" awaited."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path):
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            argv, env=env, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    def await_started(self) -> None:
        wait_until(
            lambda: self.proc.poll() is not None or any("Kafka Server started" in x for x in self.lines),
            60,
            message="Kafka Server started",
        )
        assert any("Kafka Server started" in x for x in self.lines), "".join(self.lines)

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise


def test_kafka_server_start_command_with_a_config(venv, tmp_path):
    config = tmp_path / "server.properties"
    props = dict(DEFAULTS, **{"log.dirs": str(tmp_path / "data")})
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    broker = _Started(
        [str(venv / "bin" / "kafka-server-start"), str(config)], _env(LOG_DIR=str(tmp_path / "logs")), tmp_path
    )
    try:
        broker.await_started()
        assert "Kafka Server started" in (tmp_path / "logs" / "server.log").read_text()
    finally:
        assert broker.stop() == 0


def test_python_m_pykbroker_without_a_file_uses_the_packaged_configuration(venv, tmp_path):
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.quorum.voters": "1@127.0.0.1:0",
        "log.dirs": str(tmp_path / "data"),
    }
    argv = [str(venv / "bin" / "python"), "-m", "pykbroker"]
    for k, v in overrides.items():
        argv += ["--override", f"{k}={v}"]
    broker = _Started(argv, _env(), tmp_path)
    try:
        broker.await_started()
        out = "".join(broker.lines)
        assert f"Log directories: {tmp_path / 'data'}" in out
        assert "isn't a known config" not in out  # the packaged file has Kafka's keys only
        assert "Kafka Server started" in (venv / "logs" / "server.log").read_text()  # LOG_DIR: <venv>/logs
    finally:
        assert broker.stop() == 0
