"""kafka-leader-election option validation (Kafka's LeaderElectionCommandOptions.validate messages) and
the JSON file format."""

from __future__ import annotations

import io

import pytest

from pykbroker.tools.leader_election_command import AdminCommandFailed, main, parse_election_json


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--election-type", "preferred", "--all-topic-partitions"], "Missing required option(s): --bootstrap-server"),
        (["--bootstrap-server", "h:1", "--all-topic-partitions"], "Missing required option(s): --election-type"),
        (
            ["--bootstrap-server", "h:1", "--election-type", "preferred"],
            "One and only one of the following options is required: --topic, --all-topic-partitions, "
            "--path-to-json-file",
        ),
        (
            ["--bootstrap-server", "h:1", "--election-type", "unclean", "--topic", "t", "--all-topic-partitions"],
            "One and only one of the following options is required",
        ),
        (
            ["--bootstrap-server", "h:1", "--election-type", "preferred", "--topic", "t"],
            "Missing required option(s): --partition",
        ),
        (
            ["--bootstrap-server", "h:1", "--election-type", "preferred", "--all-topic-partitions", "--partition", "1"],
            "Option --partition is only allowed if --topic is used",
        ),
    ],
)
def test_invalid_options_exit_1_with_kafkas_message(argv, message):
    out, err = io.StringIO(), io.StringIO()
    assert main(argv, out=out, err=err) == 1
    assert message in err.getvalue() and out.getvalue() == ""


def test_election_json():
    assert parse_election_json(
        '{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "b", "partition": 0}]}'
    ) == [
        ("foo", 1),
        ("b", 0),
    ]
    with pytest.raises(AdminCommandFailed, match="duplicate"):
        parse_election_json('{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foo", "partition": 1}]}')
    with pytest.raises(AdminCommandFailed):
        parse_election_json('{"partitions": [{"topic": "foo"}]}')
