"""Start-up, configuration errors, thread model and orderly shutdown."""

import os
import subprocess
import sys
import threading
import time

import pytest

from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.server.kafka_raft_server import KafkaRaftServer
from tests.helpers.broker import DEFAULTS, ROOT, BrokerProcess

pytestmark = pytest.mark.integration


def test_thread_model_3_plus_1_processors_and_one_acceptor_per_listener(tmp_path):
    props = dict(DEFAULTS, **{"num.network.threads": "3", "log.dirs": str(tmp_path / "logs")})
    server = KafkaRaftServer(KafkaConfig(props))
    server.startup()
    try:
        names = [t.name for t in threading.enumerate()]
        data = [n for n in names if n.startswith("data-plane-kafka-network-thread-1-PLAINTEXT-PLAINTEXT-")]
        control = [n for n in names if n.startswith("control-plane-kafka-network-thread-1-CONTROLLER-PLAINTEXT-")]
        acceptors = [n for n in names if "-kafka-socket-acceptor-" in n]
        handlers = [n for n in names if n.startswith("data-plane-kafka-request-handler-")]
        assert len(data) == 3, names
        assert len(control) == 1, names
        assert sorted(a.split("-acceptor-")[1].split("-")[0] for a in acceptors) == ["CONTROLLER", "PLAINTEXT"]
        assert len(handlers) == 4
        assert len([n for n in names if n.startswith("control-plane-kafka-request-handler-")]) == 1
        assert server.socket_server.control_plane_request_channel.queue_size == 20
        assert server.socket_server.data_plane_request_channel.queue_size == 500
    finally:
        server.shutdown()
    assert not [t for t in threading.enumerate() if "kafka-network-thread" in t.name or "acceptor" in t.name]


def test_sigterm_shuts_down_in_order_within_seconds(broker):
    start = time.monotonic()
    code = broker.stop(timeout=15)
    elapsed = time.monotonic() - start
    assert code == 0
    assert elapsed < 8
    out = broker.output()
    i_stop = out.index("Stopping socket server request processors")
    i_handlers = out.index("shut down completely")
    i_done = out.index("shut down completed")
    assert i_stop < i_handlers < i_done


def _run_start(args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT), LOG_DIR=str(cwd / "server-logs"))
    return subprocess.run(
        [sys.executable, "-m", "pykbroker.kafka", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_bad_value_stops_startup_with_one_clear_line(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in DEFAULTS.items()) + "num.io.threads=lots\n")
    r = _run_start([str(cfg)], tmp_path)
    assert r.returncode == 1
    err = [line for line in r.stderr.splitlines() if line.strip()]
    assert err == ["ERROR: Invalid value lots for configuration num.io.threads: Not a number of type INT"]


def test_override_wins_and_missing_required_key(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in DEFAULTS.items() if k != "node.id"))
    r = _run_start([str(cfg)], tmp_path)
    assert r.returncode == 1
    assert "node.id" in r.stderr
    r = _run_start([str(cfg), "--override", "node.id=1", "--override", "num.io.threads=-3"], tmp_path)
    assert r.returncode == 1 and "Invalid value -3 for configuration num.io.threads" in r.stderr


def test_usage_line_on_bad_arguments(tmp_path):
    r = _run_start(["--bogus"], tmp_path)  # (no argument at all starts the package's default configuration)
    assert r.returncode == 1 and r.stderr.startswith(
        "USAGE: kafka-server-start [-daemon] server.properties [--override property=value]*"
    )
    r = _run_start(["x.properties", "--bogus"], tmp_path)
    assert r.returncode == 1 and "USAGE:" in r.stderr
    script = subprocess.run(
        [str(ROOT / "bin" / "kafka-server-start"), "--bogus"], capture_output=True, text=True, timeout=30
    )
    # (the wrapper may first print its own virtualenv set-up lines)
    assert script.returncode == 1 and script.stderr.splitlines()[-1].startswith("USAGE:")


def test_unknown_key_is_a_warning(broker_factory):
    b = broker_factory(**{"some.unknown.key": "1"})
    assert b.wait_for_line(r"WARN .*The configuration 'some.unknown.key' was supplied but isn't a known config")


def test_restart_keeps_cluster_id_and_other_node_is_refused(broker_factory):
    b = broker_factory()
    meta = (b.data_dir / "logs" / "meta.properties").read_text()
    b.restart()
    assert (b.data_dir / "logs" / "meta.properties").read_text() == meta
    b.stop()
    b.props["node.id"] = "2"
    b.props["controller.quorum.voters"] = "2@127.0.0.1:0"
    with pytest.raises(RuntimeError, match="Stored node id 1 doesn't match previous node id 2"):
        b.start(timeout=20)


def _serves(bootstrap: str, topic: str) -> bool:
    """CreateTopics then a produce acknowledged at offset 0."""
    from tests.helpers.topics import create_topic, produce_raw, record_batch

    create_topic(bootstrap, topic, partitions=1)
    r = produce_raw(bootstrap, topic, record_batch(3))
    return r["error_code"] == 0 and r["base_offset"] == 0


def test_second_broker_on_the_same_log_dirs_is_refused(broker_factory, tmp_path):
    a = broker_factory("a")
    log_dir = a.data_dir / "logs"
    meta = (log_dir / "meta.properties").read_text()
    b = BrokerProcess(tmp_path / "b", log_dirs=str(log_dir))  # same log.dirs, its own ephemeral ports
    b.write_config()
    r = _run_start([str(b.config_path)], b.data_dir)
    out = r.stdout + r.stderr
    expected = (
        f"Failed to acquire lock on file .lock in {log_dir}. "
        "A Kafka instance in another process or thread is using this directory."
    )
    assert r.returncode == 1, out
    assert len([line for line in out.splitlines() if expected in line]) == 1, out
    assert "Traceback" not in out
    assert "Recovered partition" not in out and "Loaded logs" not in out
    assert (log_dir / "meta.properties").read_text() == meta
    assert a.proc.poll() is None and _serves(a.bootstrap, "still-served")
    a.stop()
    a.start()
    assert _serves(a.bootstrap, "after-restart")


def test_port_in_use_fails_before_touching_storage(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        b = BrokerProcess(tmp_path / "b", listeners=f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:0")
        b.write_config()
        r = _run_start([str(b.config_path)], b.data_dir)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    expected = f"Socket server failed to bind to 127.0.0.1:{port}: Address already in use."
    assert len([line for line in out.splitlines() if expected in line]) == 1, out
    assert "Traceback" not in out
    logs = b.data_dir / "logs"
    assert not (logs / "meta.properties").exists()
    assert not logs.exists() or not os.listdir(logs)


def test_start_up_waits_are_bounded_and_fail_with_one_line(tmp_path, monkeypatch):
    from pykbroker.metadata.quorum_controller import QuorumController
    from pykbroker.server.kafka_raft_server import StartupError

    monkeypatch.setattr(QuorumController, "wait_for_active", lambda self, timeout: False)
    props = dict(DEFAULTS, **{"log.dirs": str(tmp_path / "logs"), "initial.broker.registration.timeout.ms": "500"})
    server = KafkaRaftServer(KafkaConfig(props))
    with pytest.raises(
        StartupError, match="^Timed out after 500 ms waiting for the metadata quorum controller to become active$"
    ):
        server.startup()
    server.shutdown()
    monkeypatch.undo()
    again = KafkaRaftServer(KafkaConfig(props))  # the directory locks were released by the shutdown
    again.startup()
    again.shutdown()


def test_broker_state_is_kafkas_enum_and_gauge(tmp_path):
    """BrokerState: Kafka's values, the gauge ``kafka.server:type=KafkaServer,name=BrokerState`` exports
    them as numbers (RUNNING 3 while serving, SHUTTING_DOWN 7 after the shutdown)."""
    from pykbroker.server.broker_state import BrokerState

    assert [(s.name, s.value) for s in BrokerState] == [
        ("NOT_RUNNING", 0),
        ("STARTING", 1),
        ("RECOVERY", 2),
        ("RUNNING", 3),
        ("PENDING_CONTROLLED_SHUTDOWN", 6),
        ("SHUTTING_DOWN", 7),
        ("UNKNOWN", 127),
    ]
    server = KafkaRaftServer(KafkaConfig(dict(DEFAULTS, **{"log.dirs": str(tmp_path / "logs")})))
    gauge = server.metrics.get("kafka.server:type=KafkaServer,name=BrokerState")
    assert server.broker_state is BrokerState.NOT_RUNNING and gauge.value == 0
    server.startup()
    try:
        assert server.broker_state is BrokerState.RUNNING
        assert type(gauge.value) is int and gauge.value == 3
    finally:
        server.shutdown()
    assert server.broker_state is BrokerState.SHUTTING_DOWN and gauge.value == 7


def test_an_attribute_error_inside_a_component_shutdown_is_reported_and_the_rest_stops(tmp_path, monkeypatch, capfd):
    """A component whose shutdown raises AttributeError is an error like any other: logged, and the later
    steps still run (the logs are closed cleanly, the directory locks released). The shutdown used to
    swallow every AttributeError as "that part never started"."""
    from pykbroker.coordinator.group.group_coordinator import GroupCoordinator

    def broken_shutdown(self):
        raise AttributeError("'GroupCoordinator' object has no attribute 'gone'")

    logs = tmp_path / "logs"
    props = dict(DEFAULTS, **{"log.dirs": str(logs)})
    server = KafkaRaftServer(KafkaConfig(props))
    server.startup()
    monkeypatch.setattr(GroupCoordinator, "shutdown", broken_shutdown)
    capfd.readouterr()
    server.shutdown()
    monkeypatch.undo()
    captured = capfd.readouterr()
    output = captured.out + captured.err
    assert "Error shutting down group coordinator" in output
    assert "object has no attribute" in output and "gone" in output
    assert (logs / ".kafka_cleanshutdown").exists()  # the log manager still shut down cleanly
    again = KafkaRaftServer(KafkaConfig(props))  # and the directory locks were released
    again.startup()
    again.shutdown()
