"""bin/kafka-storage format / random-uuid / info, then the broker starts on the formatted directories; nodes
other than the single-node default refuse unformatted storage, and directories of different clusters."""

import os
import subprocess
import sys
import time

import pytest

from pykbroker.config.properties import load_properties
from tests.helpers.broker import ROOT, BrokerProcess

pytestmark = pytest.mark.integration


def storage(*args):
    return subprocess.run(
        [sys.executable, "-m", "pykbroker.tools.storage_tool", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_random_uuid_format_and_start(tmp_path):
    r = storage("random-uuid")
    assert r.returncode == 0
    cluster_id = r.stdout.strip()
    assert len(cluster_id) == 22
    b = BrokerProcess(tmp_path / "b")
    b.write_config()
    r = storage("format", "-t", cluster_id, "-c", str(b.config_path))
    assert r.returncode == 0, r.stderr
    assert f"cluster.id={cluster_id}" in (tmp_path / "b" / "logs" / "meta.properties").read_text()
    again = storage("format", "-t", cluster_id, "-c", str(b.config_path))
    assert again.returncode == 1 and "is already formatted" in again.stderr
    assert storage("format", "-t", cluster_id, "-c", str(b.config_path), "--ignore-formatted").returncode == 0
    assert storage("format", "-t", "not-a-uuid", "-c", str(b.config_path)).returncode == 1
    b.start()
    try:
        from confluent_kafka.admin import AdminClient

        assert AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).cluster_id == cluster_id
    finally:
        b.stop()


# -- clusters: every node formatted with kafka-storage, only the single-node default formats itself -------------

THREE_VOTERS = "1@127.0.0.1:19091,2@127.0.0.1:19092,3@127.0.0.1:19093"


def _node(tmp_path, name, **overrides) -> BrokerProcess:
    b = BrokerProcess(tmp_path / name, **overrides)
    b.write_config()
    return b


def start_node(b: BrokerProcess) -> tuple[subprocess.CompletedProcess, float]:
    """``bin/kafka-server-start <config>`` as the script runs it (``python -m pykbroker.kafka``; the script
    itself would install a virtualenv in the checkout); expected to exit on its own."""
    began = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pykbroker.kafka", str(b.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=b.data_dir,
        env=dict(os.environ, PYTHONPATH=str(ROOT), LOG_DIR=str(b.log_dir)),
    )
    return run, time.monotonic() - began


def _fatal_lines(run: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (run.stdout + run.stderr).splitlines() if "Exiting Kafka due to fatal exception" in line]


def test_format_a_voter_of_a_three_voter_quorum(tmp_path):
    cluster_id = storage("random-uuid").stdout.strip()
    b = _node(
        tmp_path,
        "n2",
        node_id="2",
        controller_quorum_voters=THREE_VOTERS,
        log_dirs=f"{tmp_path / 'n2' / 'data-b'},{tmp_path / 'n2' / 'data-a'}",
        metadata_log_dir=str(tmp_path / "n2" / "meta"),
    )
    r = storage("format", "-t", cluster_id, "-c", str(b.config_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"Formatting data directory {tmp_path / 'n2' / 'data-a'} with metadata.version 4.0-IV3.",
        f"Formatting data directory {tmp_path / 'n2' / 'data-b'} with metadata.version 4.0-IV3.",
        f"Formatting metadata directory {tmp_path / 'n2' / 'meta'} with metadata.version 4.0-IV3.",
    ]
    directory_ids = set()
    for d in ("data-a", "data-b", "meta"):
        meta = load_properties(str(tmp_path / "n2" / d / "meta.properties"))
        assert (meta["cluster.id"], meta["node.id"], meta["version"]) == (cluster_id, "2", "1")
        directory_ids.add(meta["directory.id"])
    assert len(directory_ids) == 3
    info = storage("info", "-c", str(b.config_path))
    assert info.returncode == 0, info.stdout
    assert info.stdout.splitlines()[0] == "Found log directories:"
    assert f"cluster.id={cluster_id}" in info.stdout and "node.id=2" in info.stdout
    again = storage("format", "-t", cluster_id, "-c", str(b.config_path), "--ignore-formatted")
    assert again.returncode == 0 and again.stdout.strip() == "All of the log directories are already formatted."
    other = storage("format", "-t", storage("random-uuid").stdout.strip(), "-c", str(b.config_path), "-g")
    assert other.returncode == 1 and other.stderr.startswith(
        f"Invalid cluster.id in: {tmp_path / 'n2' / 'data-a' / 'meta.properties'}. Expected "
    )


def test_quorum_flags_with_static_voters_and_without(tmp_path):
    cluster_id = storage("random-uuid").stdout.strip()
    voters = _node(tmp_path, "voters", controller_quorum_voters=THREE_VOTERS)
    r = storage("format", "-t", cluster_id, "-c", str(voters.config_path), "--standalone")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == (
        "controller.quorum.voters is set (a static quorum): --standalone is ignored and this node is formatted for "
        f"the static quorum of controller.quorum.voters ({THREE_VOTERS})."
    )
    assert not (tmp_path / "voters" / "logs" / "__cluster_metadata-0").exists()
    no_voters = _node(tmp_path, "no-voters", controller_quorum_voters="")
    r = storage("format", "-t", cluster_id, "-c", str(no_voters.config_path))
    assert r.returncode == 1 and r.stderr.strip() == (
        "Because controller.quorum.voters is not set on this controller, you must specify one of the following: "
        "--standalone, --initial-controllers, or --no-initial-controllers."
    )
    r = storage("format", "-t", cluster_id, "-c", str(no_voters.config_path), "-I", "1@localhost:9093:nonsense")
    assert r.returncode == 1 and "expected id@host:port:directory-id" in r.stderr
    both = storage("format", "-t", cluster_id, "-c", str(no_voters.config_path), "-s", "-N")
    assert both.returncode == 1 and "not allowed with argument" in both.stderr
    zero = storage("format", "-t", cluster_id, "-c", str(no_voters.config_path), "-s", "-f", "kraft.version=0")
    assert zero.returncode == 1 and "Cannot set kraft.version to 0 if KIP-853 configuration is present" in zero.stderr


def test_standalone_and_initial_controllers_write_the_bootstrap_snapshot(tmp_path):
    """KIP-853: the voter set goes into __cluster_metadata-0/00000000000000000000-0000000000.checkpoint (a
    KRaftVersionRecord at 1 and a VotersRecord), and the voter's directory id into meta.properties."""
    from pykbroker.raft.control_records import (
        KRAFT_VERSION,
        KRAFT_VOTERS,
        KRaftVersionRecord,
        VoterEndpoint,
        VotersRecord,
    )
    from pykbroker.raft.log_batch_codec import decode_log_batches
    from pykbroker.raft.records_snapshot import RecordsSnapshotReader
    from pykbroker.raft.snapshots import FileRawSnapshotReader, SnapshotId
    from pykbroker.server.meta_properties import uuid_from_string

    def voters_in(node_dir):
        path = node_dir / "logs" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"
        reader = RecordsSnapshotReader(FileRawSnapshotReader(SnapshotId(0, 0), str(path)), None)
        records = {}
        for batch in reader.control_batches:
            for r in batch.records:
                records[int.from_bytes(r.key[2:4], "big")] = r.value
        assert list(decode_log_batches(path.read_bytes()))  # a valid batch file
        assert KRaftVersionRecord.decode(records[KRAFT_VERSION]).kraft_version == 1
        return VotersRecord.decode(records[KRAFT_VOTERS]).voters

    cluster_id = storage("random-uuid").stdout.strip()
    solo = _node(
        tmp_path,
        "solo",
        controller_quorum_voters="",
        process_roles="controller",
        listeners="CONTROLLER://127.0.0.1:19095",
    )
    r = storage("format", "-t", cluster_id, "-c", str(solo.config_path), "--standalone")
    assert r.returncode == 0, r.stderr
    assert "Formatting dynamic metadata voter directory" in r.stdout
    (voter,) = voters_in(tmp_path / "solo")
    meta = load_properties(str(tmp_path / "solo" / "logs" / "meta.properties"))
    assert voter.voter_id == int(meta["node.id"]) and voter.directory_id == uuid_from_string(meta["directory.id"])
    assert voter.endpoints[0] == VoterEndpoint("CONTROLLER", "127.0.0.1", 19095)

    dir1, dir2 = storage("random-uuid").stdout.strip(), storage("random-uuid").stdout.strip()
    three = _node(tmp_path, "three", controller_quorum_voters="", process_roles="controller")
    node_id = load_properties(str(three.config_path))["node.id"]
    initial = f"{node_id}@127.0.0.1:19091:{dir1},99@127.0.0.1:19092:{dir2}"
    r = storage("format", "-t", cluster_id, "-c", str(three.config_path), "--initial-controllers", initial)
    assert r.returncode == 0, r.stderr
    assert [(v.voter_id, v.endpoints[0].port) for v in voters_in(tmp_path / "three")] == [
        (int(node_id), 19091),
        (99, 19092),
    ]
    meta = load_properties(str(tmp_path / "three" / "logs" / "meta.properties"))
    assert meta["directory.id"] == dir1
    joiner = _node(tmp_path, "joiner", controller_quorum_voters="", process_roles="controller")
    r = storage("format", "-t", cluster_id, "-c", str(joiner.config_path), "--no-initial-controllers")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "joiner" / "logs" / "__cluster_metadata-0").exists()


def test_unformatted_multi_voter_node_is_refused_at_once(tmp_path):
    b = _node(tmp_path, "n1", controller_quorum_voters=THREE_VOTERS)
    run, took = start_node(b)
    assert run.returncode == 1
    (line,) = _fatal_lines(run)
    assert line.endswith("fatal exception during startup: No readable meta.properties files found.")
    assert took < 20  # before any quorum wait
    assert not (tmp_path / "n1" / "logs" / "meta.properties").exists()  # nothing formatted


def test_unformatted_broker_only_node_is_refused(tmp_path):
    b = _node(
        tmp_path,
        "broker",
        node_id="4",
        process_roles="broker",
        controller_quorum_voters="1@127.0.0.1:19091",
        listeners="PLAINTEXT://127.0.0.1:0",
    )
    run, _ = start_node(b)
    assert run.returncode == 1
    (line,) = _fatal_lines(run)
    assert line.endswith("No readable meta.properties files found.")


def test_directories_of_different_clusters_are_refused(tmp_path):
    b = _node(tmp_path, "b", log_dirs=f"{tmp_path / 'b' / 'd1'},{tmp_path / 'b' / 'd2'}")
    assert storage("format", "-t", storage("random-uuid").stdout.strip(), "-c", str(b.config_path)).returncode == 0
    d2 = tmp_path / "b" / "d2" / "meta.properties"
    first = load_properties(str(tmp_path / "b" / "d1" / "meta.properties"))["cluster.id"]
    other = storage("random-uuid").stdout.strip()
    d2.write_text(d2.read_text().replace(first, other))
    info = storage("info", "-c", str(b.config_path))
    assert info.returncode == 1 and "Mismatched cluster IDs between storage directories." in info.stdout
    run, _ = start_node(b)
    assert run.returncode == 1
    (line,) = _fatal_lines(run)
    assert line.endswith(f"Invalid cluster.id in: {d2}. Expected {first}, but read {other}")


def test_single_node_default_adds_an_empty_dir_but_a_cluster_node_does_not(tmp_path):
    """The single-node default formats a log dir added empty; Kafka (and every other node) refuses it."""
    b = _node(tmp_path, "b", controller_quorum_voters=THREE_VOTERS)
    cluster_id = storage("random-uuid").stdout.strip()
    assert storage("format", "-t", cluster_id, "-c", str(b.config_path)).returncode == 0
    b.props["log.dirs"] = f"{tmp_path / 'b' / 'logs'},{tmp_path / 'b' / 'added'}"
    b.write_config()
    run, _ = start_node(b)
    assert run.returncode == 1
    (line,) = _fatal_lines(run)
    assert line.endswith(
        f"No `meta.properties` found in {tmp_path / 'b' / 'added'} (have you run `kafka-storage.sh` to format "
        "the directory?)"
    )
