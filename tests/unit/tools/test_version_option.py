"""``--version`` on the tools whose Kafka counterparts have it (CommandDefaultOptions' ``versionOpt``;
kafka-transactions' ``-v, --version``): the distribution's version on stdout, exit 0, nothing else checked (no
--bootstrap-server)."""

from __future__ import annotations

import pytest

from pykbroker import __version__
from tests.helpers.tools import run_tool

# module -> the bin/ tool (Kafka's name) it runs
TOOLS = {
    "topic_command": "kafka-topics",
    "config_command": "kafka-configs",
    "acl_command": "kafka-acls",
    "consumer_group_command": "kafka-consumer-groups",
    "share_group_command": "kafka-share-groups",
    "reassign_partitions_command": "kafka-reassign-partitions",
    "delete_records_command": "kafka-delete-records",
    "log_dirs_command": "kafka-log-dirs",
    "leader_election_command": "kafka-leader-election",
    "broker_api_versions_command": "kafka-broker-api-versions",
    "delegation_token_command": "kafka-delegation-tokens",
    "console_producer": "kafka-console-producer",
    "console_consumer": "kafka-console-consumer",
    "get_offset_shell": "kafka-get-offsets",
    "dump_log_segments": "kafka-dump-log",
    "consumer_performance": "kafka-consumer-perf-test",
    "transactions_command": "kafka-transactions",
}


@pytest.mark.parametrize("module", sorted(TOOLS))
def test_version_prints_the_distribution_version_and_exits_0(module):
    run = run_tool(module, "--version")
    assert (run.returncode, run.stdout, run.stderr) == (0, f"{__version__}\n", ""), TOOLS[module]


@pytest.mark.parametrize("module", ["topic_command", "transactions_command"])
def test_version_is_listed_in_the_help(module):
    run = run_tool(module, "--help")
    assert run.returncode == 0
    assert "--version" in run.stdout


def test_kafka_transactions_takes_v_too():
    run = run_tool("transactions_command", "-v")
    assert (run.returncode, run.stdout) == (0, f"{__version__}\n")


def test_without_version_the_required_options_are_still_checked():
    run = run_tool("topic_command", "--list")
    assert run.returncode == 1
    assert run.stdout == ""
