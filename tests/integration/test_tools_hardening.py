"""Hardening of the broker process and the command-line tools: shutdown with a dead stdout,
kafka-server-stop filters, config-relative data directories, perf-test counts, tool output streams."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers.broker import ROOT, BrokerProcess
from tests.helpers.tools import run_tool
from tests.helpers.topics import create_topic

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(module_broker):
    """The module's one broker: the tests that take it each create and check a topic of their own and change no
    broker or cluster config (those that do start their own with ``broker_factory``)."""
    return module_broker


def perf_test(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pykbroker.tools.producer_performance", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_perf_test_counts_every_record(broker):
    """flush() used to return before the last delivery callbacks ran: 917 of 1000 records reported."""
    create_topic(broker.bootstrap, "exact", 3)
    for _ in range(3):
        run = perf_test(
            "--topic",
            "exact",
            "--num-records",
            "1000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={broker.bootstrap}",
            "acks=1",
            "linger.ms=0",
        )
        assert run.returncode == 0, run.stderr
        assert re.match(r"^1000 records sent, ", run.stdout.splitlines()[-1]), run.stdout


def test_perf_test_payload_monotonic_sends_record_numbers(broker):
    """``--payload-monotonic``: record i's value is ``str(i)`` (Kafka's ProducerPerformance); only one
    payload option is allowed."""
    from confluent_kafka import Consumer, TopicPartition

    create_topic(broker.bootstrap, "monotonic", 1)
    common = ["--topic", "monotonic", "--num-records", "300", "--throughput", "-1"]
    props = ["--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=1"]
    run = perf_test(*common, "--payload-monotonic", *props)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1].startswith("300 records sent, ")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "monotonic", "enable.auto.commit": False})
    c.assign([TopicPartition("monotonic", 0, 0)])
    values = []
    try:
        while len(values) < 300:
            msgs = c.consume(300, 10)
            assert msgs, f"only {len(values)} records read back"
            values.extend(m.value() for m in msgs if m.error() is None)
    finally:
        c.close()
    assert values == [str(i).encode() for i in range(300)]
    both = perf_test(*common, "--payload-monotonic", "--record-size", "10", *props)
    assert both.returncode == 1 and "not allowed with argument" in both.stderr


def _start_piped(
    config: Path, cwd: Path, *extra: str, keep_reading: bool = False
) -> tuple[subprocess.Popen, list[str]]:
    """``python -m pykbroker.kafka config`` with stdout and stderr into one pipe, read up to
    "Kafka Server started" (bounded); then the caller owns the pipe's read end, unless ``keep_reading``
    (the lines keep arriving in the returned list)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", LOG_DIR=str(config.parent / "server-logs"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pykbroker.kafka", str(config), *extra],
        cwd=str(cwd),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    lines: list[str] = []
    started = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if "Kafka Server started" in line:
                started.set()
                if not keep_reading:
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not started.wait(30):
        proc.kill()
        proc.wait(10)
        raise AssertionError("broker did not start:\n" + "\n".join(lines[-30:]))
    if not keep_reading:
        reader.join(5)
    return proc, lines


def test_sigterm_shuts_down_cleanly_when_stdout_reader_is_gone(tmp_path):
    """``kafka-server-start ... | tee log`` then Ctrl-C: tee dies first, the shutdown's first log line
    hits a broken pipe. The shutdown must still run to the end and the process exit."""
    b = BrokerProcess(tmp_path / "b")
    b.write_config()
    proc, _ = _start_piped(b.config_path, b.data_dir)
    try:
        proc.stdout.close()  # the reader goes away: every later write to stdout/stderr gets EPIPE
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert (b.data_dir / "logs" / ".kafka_cleanshutdown").exists()


def server_stop(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYKBROKER_VENV=sys.prefix)
    return subprocess.run(
        [str(ROOT / "bin" / "kafka-server-stop"), *args], capture_output=True, text=True, env=env, timeout=60
    )


def test_server_stop_help_and_node_id_filter(broker_factory):
    # Unusual node ids: the machine may run other people's test brokers (node.id=1), never touched here.
    base = 7000 + os.getpid() % 1000 * 2
    a = broker_factory("a", node_id=base, controller_quorum_voters=f"{base}@127.0.0.1:0")
    b = broker_factory("b", node_id=base + 1, controller_quorum_voters=f"{base + 1}@127.0.0.1:0")
    help_run = server_stop("--help")
    assert help_run.returncode == 0
    assert help_run.stdout.startswith("USAGE: kafka-server-stop")
    assert "--node-id" in help_run.stdout and "--process-role" in help_run.stdout
    none = server_stop("--process-role=controller", f"--node-id={base + 999}")
    assert none.returncode == 1
    assert none.stdout.splitlines() == [
        "When both node-id and process-role are provided, the value for node-id will take precedence",
        "No kafka server to stop",
    ]
    bad = server_stop("--node", str(base))
    assert bad.returncode == 1 and "USAGE: kafka-server-stop" in bad.stderr
    stop = server_stop("--node-id", str(base))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert a.proc.wait(20) == 0
    assert (a.data_dir / "logs" / ".kafka_cleanshutdown").exists()
    # Neither --help, the unmatched filter, the bad argument nor --node-id A touched B.
    assert b.proc.poll() is None
    create_topic(b.bootstrap, "still-up", 1)


def test_relative_log_dirs_are_taken_from_the_config_files_directory(tmp_path):
    conf = BrokerProcess(tmp_path / "conf", log_dirs="../data/logs")
    conf.write_config()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    expected = tmp_path / "data" / "logs"
    proc, lines = _start_piped(conf.config_path, elsewhere, keep_reading=True)
    try:
        logged = [ln for ln in lines if "Log directories: " in ln]
        assert len(logged) == 1, lines
        assert f"Log directories: {expected} " in logged[0]
        assert (expected / "meta.properties").exists()
        assert not any(elsewhere.iterdir()) and not (tmp_path / "conf" / "data").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    # kafka-storage reads the same file the same way, from any directory.
    info = subprocess.run(
        [sys.executable, "-m", "pykbroker.tools.storage_tool", "info", "-c", str(conf.config_path)],
        cwd=str(elsewhere),
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert info.returncode == 0, info.stderr
    assert info.stdout.startswith(f"Found log directory:\n  {expected}\n"), info.stdout


DEAD = "127.0.0.1:1"  # nothing listens there: connection refused


def tool(module: str, *args: str, stdin: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run a tool as bin/ does (``python -m``, so its own logging set-up applies)."""
    return run_tool(module, *args, stdin=stdin, timeout=timeout)


def test_tools_try_every_bootstrap_server(broker, tmp_path):
    bs = ["--bootstrap-server", f"{DEAD},{broker.bootstrap}"]
    created = tool("topic_command", *bs, "--create", "--topic", "multi", "--partitions", "1")
    assert (created.returncode, created.stdout) == (0, "Created topic multi.\n"), created.stderr
    assert "multi" in tool("topic_command", *bs, "--list").stdout.splitlines()
    produced = tool("console_producer", *bs, "--topic", "multi", stdin="one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    consumed = tool(
        "console_consumer", *bs, "--topic", "multi", "--from-beginning", "--max-messages", "2", "--group", "g-multi"
    )
    assert consumed.stdout.splitlines() == ["one", "two"], consumed.stderr
    by_partition = tool(
        "console_consumer", *bs, "--topic", "multi", "--partition", "0", "--offset", "earliest", "--max-messages", "2"
    )
    assert by_partition.stdout.splitlines() == ["one", "two"], by_partition.stderr
    assert "g-multi" in tool("consumer_group_command", *bs, "--list").stdout.splitlines()
    offsets = tmp_path / "offsets.json"
    offsets.write_text('{"partitions": [{"topic": "multi", "partition": 0, "offset": 1}], "version": 1}')
    deleted = tool("delete_records_command", *bs, "--offset-json-file", str(offsets))
    assert "partition: multi-0\tlow_watermark: 1" in deleted.stdout, deleted.stdout + deleted.stderr
    perf = perf_test("--topic", "multi", "--num-records", "100", "--record-size", "10", "--throughput", "-1", *bs)
    assert perf.returncode == 0 and perf.stdout.startswith("100 records sent, "), perf.stdout + perf.stderr
    none = tool("topic_command", "--bootstrap-server", f"{DEAD},127.0.0.1:2", "--list")
    assert none.returncode == 1
    assert none.stderr.splitlines() == [
        "Error while executing topic command : Could not connect to any of the "
        "bootstrap servers: 127.0.0.1:1 (Connection refused), 127.0.0.1:2 "
        "(Connection refused)"
    ]


METADATA_WARN = re.compile(
    r"^\[[\d :,-]+\] WARN \[Consumer clientId=[^\]]*\] The metadata response from the cluster "
    r"reported a recoverable issue with correlation id \d+ : \{absent=UNKNOWN_TOPIC_OR_PARTITION\}$"
)


@pytest.mark.parametrize("mode", [["--group", "g-absent"], ["--partition", "0"]], ids=["group", "partition"])
def test_console_consumer_waits_for_a_missing_topic(broker_factory, mode):
    """No auto-creation: Kafka's consumer logs the metadata warning and keeps waiting; the records
    arrive once the topic exists. No traceback."""
    b = broker_factory(auto_create_topics_enable="false")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pykbroker.tools.console_consumer",
            "--bootstrap-server",
            b.bootstrap,
            "--topic",
            "absent",
            "--from-beginning",
            "--max-messages",
            "1",
            *mode,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        from tests.helpers.wait import wait_until

        wait_until(
            lambda: any(METADATA_WARN.match(line.rstrip("\n")) for line in err),
            15,
            message="metadata warning for the missing topic",
        )
        assert proc.poll() is None  # still waiting
        create_topic(b.bootstrap, "absent", 1)
        assert (
            tool("console_producer", "--bootstrap-server", b.bootstrap, "--topic", "absent", stdin="late\n").returncode
            == 0
        )
        # Not communicate(): it would read stderr too, racing the reader for the last lines.
        killer = threading.Timer(20, proc.kill)  # bounds the read: a hung consumer fails the test
        killer.start()
        try:
            out = proc.stdout.read()
        finally:
            killer.cancel()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    reader.join(5)
    assert proc.returncode == 0
    assert out == "late\n"
    assert not any("Traceback" in line for line in err), "".join(err)
    assert err[-1] == "Processed a total of 1 messages\n"


def test_perf_test_against_dead_broker_ends_with_one_error_line():
    run = perf_test(
        "--topic",
        "t",
        "--num-records",
        "10",
        "--record-size",
        "10",
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={DEAD}",
        "max.block.ms=1500",
        timeout=30,
    )
    assert run.returncode == 1
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert "Traceback" not in run.stderr
    assert lines[-1] == "ERROR: TimeoutError: Topic t not present in metadata after 1500 ms."
    assert any(
        re.search(
            r"WARN \[Producer clientId=[^\]]+\] Connection to node -1 \(127\.0\.0\.1:1\) could not be "
            r"established\. Node may not be available\.$",
            ln,
        )
        for ln in lines[:-1]
    ), run.stderr


def test_producer_tools_keep_stdout_for_their_own_output(broker):
    create_topic(broker.bootstrap, "quiet", 1)
    # The idempotent producer logs "ProducerId set" (INFO): never on stdout, and below the tools' WARN level.
    produced = tool("console_producer", "--bootstrap-server", broker.bootstrap, "--topic", "quiet", stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    assert produced.stdout == ""
    assert "ProducerId" not in produced.stderr
    perf = perf_test(
        "--topic",
        "quiet",
        "--num-records",
        "200",
        "--record-size",
        "10",
        "--throughput",
        "-1",
        "--bootstrap-server",
        broker.bootstrap,
    )
    assert perf.returncode == 0, perf.stderr
    assert len(perf.stdout.splitlines()) == 1 and perf.stdout.startswith("200 records sent, "), perf.stdout
