"""kafka-reassign-partitions without a cluster: Kafka's JSON format, the validation of a reassignment file, the
rack-unaware assignment of --generate, the throttle configs of --throttle, and the option checks."""

from __future__ import annotations

import io
import json
import random

import pytest

from pykbroker.tools import reassign_partitions_command as cmd


def test_reassignment_json_is_kafkas_compact_sorted_format():
    text = cmd.format_as_reassignment_json({("b", 0): [3], ("a", 1): [1, 2], ("a", 0): [2, 1]})
    assert text == (
        '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[2,1],"log_dirs":["any","any"]},'
        '{"topic":"a","partition":1,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"b","partition":0,"replicas":[3],"log_dirs":["any"]}]}'
    )
    parts, dirs = cmd.parse_reassignment_data(text)
    assert parts == [(("a", 0), [2, 1]), (("a", 1), [1, 2]), (("b", 0), [3])] and dirs == {}


@pytest.mark.parametrize(
    "partitions,message",
    [
        ([], "Partition reassignment list cannot be empty"),
        ([{"topic": "a", "partition": 0, "replicas": []}], "Partition replica list cannot be empty"),
        (
            [{"topic": "a", "partition": 0, "replicas": [1]}, {"topic": "a", "partition": 0, "replicas": [2]}],
            "Partition reassignment contains duplicate topic partitions: a-0",
        ),
        (
            [{"topic": "a", "partition": 0, "replicas": [1, 2, 1]}],
            "Partition replica lists may not contain duplicate entries: a-0 contains multiple entries for 1",
        ),
        (
            [{"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}],
            "Size of replicas list [1, 2] is different from size of log dirs list [any] for partition a-0",
        ),
    ],
)
def test_execute_file_validation(partitions, message):
    with pytest.raises(cmd.AdminCommandFailed) as e:
        cmd.parse_execute_assignment(json.dumps({"version": 1, "partitions": partitions}))
    assert str(e.value) == message


def test_unsupported_version():
    with pytest.raises(cmd.AdminCommandFailed, match="Not supported version field value 2"):
        cmd.parse_reassignment_data('{"version": 2, "partitions": []}')
    assert cmd.parse_topics_data('{"topics": [{"topic": "a"}, {"topic": "b"}], "version": 1}') == ["a", "b"]


def test_rack_unaware_assignment_spreads_leaders_and_replicas():
    result = cmd.assign_replicas_to_brokers([4, 2, 3], 6, 2, random.Random(1))
    assert sorted(result) == list(range(6))
    assert all(len(set(r)) == 2 and set(r) <= {2, 3, 4} for r in result.values())
    leaders = [r[0] for r in result.values()]
    assert sorted(leaders) == [2, 2, 3, 3, 4, 4]
    with pytest.raises(cmd.AdminCommandFailed, match="Replication factor: 4 larger than available brokers: 3."):
        cmd.assign_replicas_to_brokers([1, 2, 3], 1, 4)


def test_throttled_replicas_are_sources_for_leaders_and_new_replicas_for_followers():
    moves = cmd.proposed_move_map({}, {("t", 0): [4, 2, 3], ("t", 1): [1, 4]}, {("t", 0): [1, 2, 3], ("t", 1): [2, 3]})
    assert moves == {("t", 0): ({1, 2, 3}, {4}), ("t", 1): ({2, 3}, {1, 4})}

    class Recorder:
        def __init__(self):
            self.resources: list = []

        def incremental_alter_configs(self, resources):
            self.resources.extend(resources)

    out = io.StringIO()
    recorder = Recorder()
    cmd.modify_reassignment_throttle(recorder, moves, 1000, out)  # type: ignore[arg-type]
    topic, *brokers = recorder.resources
    assert topic == (
        2,
        "t",
        [
            (cmd.LEADER_REPLICAS, cmd.SET, "0:1,0:2,0:3,1:2,1:3"),
            (cmd.FOLLOWER_REPLICAS, cmd.SET, "0:4,1:1,1:4"),
        ],
    )
    assert [b[1] for b in brokers] == ["1", "2", "3", "4"]
    assert brokers[0][2] == [(cmd.LEADER_RATE, cmd.SET, "1000"), (cmd.FOLLOWER_RATE, cmd.SET, "1000")]
    assert out.getvalue() == "The inter-broker throttle limit was set to 1000 B/s\n"


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--bootstrap-server", "h:1"], "Command must include exactly one action: --generate, --execute, --verify"),
        (["--bootstrap-server", "h:1", "--list", "--verify"], "Command must include exactly one action"),
        (["--list"], "Please specify either --bootstrap-server or --bootstrap-controller"),
        (["--bootstrap-server", "h:1", "--execute"], 'Missing required argument "[reassignment-json-file]"'),
        (["--bootstrap-server", "h:1", "--generate", "--broker-list", "1"], '"[topics-to-move-json-file]"'),
        (
            ["--bootstrap-server", "h:1", "--verify", "--reassignment-json-file", "f", "--throttle", "5"],
            'Option "[throttle]" can\'t be used with action "[verify]"',
        ),
    ],
)
def test_option_errors(argv, message):
    out, err = io.StringIO(), io.StringIO()
    assert cmd.main(argv, out=out, err=err) == 1
    assert message in err.getvalue() and out.getvalue() == ""
