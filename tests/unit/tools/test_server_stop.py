"""kafka-server-stop's argument parsing and process matching (no process is signalled here)."""

from __future__ import annotations

import pytest

from pykbroker.tools import server_stop


def test_only_our_entry_point_is_a_broker():
    assert server_stop._broker_args(["/venv/bin/python", "-m", "pykbroker.kafka", "conf/server.properties"]) == [
        "conf/server.properties"
    ]
    assert server_stop._broker_args(
        ["python3.11", "-u", "-m", "pykbroker.kafka", "a.properties", "--override", "node.id=3"]
    ) == ["a.properties", "--override", "node.id=3"]
    assert server_stop._broker_args(
        ["python", "-X", "dev", "-W", "error", "-m", "pykbroker.kafka", "s.properties"]
    ) == ["s.properties"]
    assert server_stop._broker_args(["python", "-m", "pykbroker.tools.server_stop", "--help"]) is None
    assert server_stop._broker_args(["python", "-c", "import x", "-m", "pykbroker.kafka"]) is None
    assert server_stop._broker_args(["python", "script.py", "-m", "pykbroker.kafka"]) is None
    assert server_stop._broker_args(["java", "-cp", "x", "kafka.Kafka", "server.properties"]) is None
    assert server_stop._broker_args(["bash", "-c", "python -m pykbroker.kafka x"]) is None


def test_arguments_in_both_spellings_and_help():
    assert server_stop.parse_args([]) == (None, None)
    assert server_stop.parse_args(["--node-id=3"]) == (None, "3")
    assert server_stop.parse_args(["--node-id", "3", "--process-role", "broker"]) == ("broker", "3")
    assert server_stop.parse_args(["--process-role=controller", "--help"]) is None
    for bad in (["--node-id"], ["--process-role=admin"], ["stop-everything"]):
        with pytest.raises(SystemExit):
            server_stop.parse_args(bad)


def test_matching_by_node_id_and_role():
    combined = {"node.id": "2", "process.roles": "broker,controller"}
    assert server_stop.matches(combined, None, "2") and not server_stop.matches(combined, None, "1")
    assert server_stop.matches(combined, "broker", None) and server_stop.matches(combined, "controller", None)
    assert not server_stop.matches({"node.id": "5", "process.roles": "broker"}, "controller", None)
    assert server_stop.matches({"node.id": "5", "process.roles": "broker"}, "controller", "5")  # node id wins


def test_config_overrides_count(tmp_path):
    (tmp_path / "server.properties").write_text("node.id=1\nprocess.roles=broker,controller\n")
    props = server_stop.process_config(["server.properties", "--override", "node.id=4"], str(tmp_path))
    assert props["node.id"] == "4"


def test_package_entry_points_are_brokers_too():
    assert server_stop._broker_args(["python3", "-m", "pykbroker", "--override", "node.id=2"]) == [
        "--override",
        "node.id=2",
    ]
    assert server_stop._broker_args(
        ["/venv/bin/python3", "/venv/bin/kafka-server-start", "-daemon", "s.properties"]
    ) == [
        "-daemon",
        "s.properties",
    ]
    assert server_stop._broker_args(["/venv/bin/python3", "/venv/bin/kafka-topics", "--list"]) is None
    assert server_stop._broker_args(["python", "-m", "pykbroker.testing"]) is None


def test_config_of_a_broker_started_without_a_file_is_the_default(tmp_path):
    props = server_stop.process_config(["-daemon", "--override", "node.id=7"], str(tmp_path))
    assert props["node.id"] == "7" and props["process.roles"] == "broker,controller"
