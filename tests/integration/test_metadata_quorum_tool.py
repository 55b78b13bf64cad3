"""kafka-metadata-quorum and DescribeQuorum against one real combined node (one voter): the node answers on
its PLAINTEXT and its CONTROLLER listener, with true values (leader = this node, a growing high watermark)."""

from __future__ import annotations

import re
import time

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.tools import create_topic_with_tool, run_tool

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka(module_broker):
    return module_broker


def controller(kafka) -> str:
    return f"127.0.0.1:{kafka.ports['CONTROLLER']}"


def status(*connect: str) -> dict[str, str]:
    run = run_tool("metadata_quorum_command", *connect, "describe", "--status")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == [
        "ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag", "MaxFollowerLagTimeMs",
        "CurrentVoters", "CurrentObservers",
    ]  # fmt: skip
    assert all(re.match(r"^\w+: +\S", line) and line.index(line.split()[1]) == 24 for line in lines)
    return {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in lines}


def cluster_id(kafka) -> str:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kafka.bootstrap}).list_topics(timeout=10).cluster_id


@pytest.mark.parametrize("listener", ["PLAINTEXT", "CONTROLLER"])
def test_status_on_both_listeners_is_true(kafka, listener):
    connect = (
        ("--bootstrap-server", kafka.bootstrap)
        if listener == "PLAINTEXT"
        else ("--bootstrap-controller", controller(kafka))
    )
    before = status(*connect)
    assert before["ClusterId"] == cluster_id(kafka)
    assert before["LeaderId"] == "1" and int(before["LeaderEpoch"]) >= 1
    assert before["MaxFollowerLag"] == "0" and before["MaxFollowerLagTimeMs"] == "0"
    assert before["CurrentVoters"] == (
        f'[{{"id": 1, "directoryId": null, "endpoints": ["CONTROLLER://127.0.0.1:{kafka.ports["CONTROLLER"]}"]}}]'
    )
    assert before["CurrentObservers"] == "[]"
    create_topic_with_tool(kafka.bootstrap, f"quorum-{listener.lower()}")
    after = status(*connect)
    assert int(after["HighWatermark"]) > int(before["HighWatermark"]) > 0
    assert after["LeaderEpoch"] == before["LeaderEpoch"]


def test_replication_table(kafka):
    run = run_tool("metadata_quorum_command", "--bootstrap-server", kafka.bootstrap, "describe", "--replication")
    assert run.returncode == 0, run.stderr
    header, *rows = run.stdout.splitlines()
    assert header.split() == [
        "NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status",
    ]  # fmt: skip
    assert header.endswith("\t") and len(rows) == 1
    node, directory, leo, lag, fetched, caught_up, state = rows[0].split()
    assert (node, directory, lag, state) == ("1", "AAAAAAAAAAAAAAAAAAAAAA", "0", "Leader")
    assert int(leo) > 0 and fetched == caught_up and abs(int(fetched) - time.time() * 1000) < 60_000
    human = run_tool(
        "metadata_quorum_command", "--bootstrap-controller", controller(kafka), "describe", "--replication",
        "--human-readable",
    )  # fmt: skip
    assert human.returncode == 0, human.stderr
    assert re.search(r"\t\d+ ms ago\s*\t\d+ ms ago\s*\tLeader\s*\t$", human.stdout.splitlines()[1])


def test_argument_errors(kafka):
    both = run_tool("metadata_quorum_command", "--bootstrap-server", kafka.bootstrap, "describe")
    assert both.returncode == 1
    assert both.stderr.strip() == "One of --status or --replication must be specified with describe sub-command"
    human = run_tool(
        "metadata_quorum_command", "--bootstrap-server", kafka.bootstrap, "describe", "--status", "--human-readable"
    )
    assert human.returncode == 1
    assert human.stderr.strip() == "The option --human-readable is only supported along with --replication"
    neither = run_tool("metadata_quorum_command", "describe", "--status")
    assert neither.returncode == 1 and "--bootstrap-server" in neither.stderr
    twice = run_tool(
        "metadata_quorum_command", "--bootstrap-server", kafka.bootstrap, "--bootstrap-controller",
        controller(kafka), "describe", "--status",
    )  # fmt: skip
    assert twice.returncode == 1 and "not allowed with argument" in twice.stderr
    missing = run_tool(
        "metadata_quorum_command", "--bootstrap-server", kafka.bootstrap, "--command-config", "/nonexistent",
        "describe", "--status",
    )  # fmt: skip
    assert missing.returncode == 1 and missing.stderr.strip() == "Properties file /nonexistent does not exists!"


def test_describe_quorum_of_another_partition_is_unknown(kafka):
    with BrokerConnection.to(kafka.bootstrap) as conn:
        response = conn.request(
            ApiKeys.DESCRIBE_QUORUM,
            2,
            {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 1}]}]},
        )
        assert response["error_code"] == errors.NONE and response["nodes"] == []
        (topic,) = response["topics"]
        assert topic["topic_name"] == "__cluster_metadata"
        assert [p["error_code"] for p in topic["partitions"]] == [errors.UNKNOWN_TOPIC_OR_PARTITION]
        for version in (0, 1):  # older versions: no nodes, no directory ids (v0: no timestamps)
            response = conn.request(
                ApiKeys.DESCRIBE_QUORUM,
                version,
                {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
            )
            (partition,) = response["topics"][0]["partitions"]
            assert partition["error_code"] == errors.NONE and partition["leader_id"] == 1
            assert [v["replica_id"] for v in partition["current_voters"]] == [1]
