"""kafka-configs, kafka-get-offsets, kafka-broker-api-versions, kafka-topics --alter and its describe filters,
and the Kafka ``.sh`` names of the bin/ tools, against one real broker (Kafka's output formats)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.broker import ROOT
from tests.helpers.tools import create_topic_with_tool, run_tool
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka(module_broker):
    return module_broker


def tool(module: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_tool(module, *args, timeout=timeout)


def create(kafka, topic: str, partitions: int = 1, *config: str) -> None:
    create_topic_with_tool(kafka.bootstrap, topic, partitions, *config)


def configs(kafka, *args: str) -> subprocess.CompletedProcess:
    return tool("config_command", "--bootstrap-server", kafka.bootstrap, *args)


def test_configs_describe_and_alter_topic(kafka):
    create(kafka, "cfg", 1, "retention.ms=600000")
    run = configs(kafka, "--describe", "--entity-type", "topics", "--entity-name", "cfg")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "Dynamic configs for topic cfg are:"
    assert len(run.stdout.splitlines()) == 2, run.stdout
    assert re.fullmatch(
        r"  retention\.ms=600000 sensitive=false synonyms=\{DYNAMIC_TOPIC_CONFIG:retention\.ms=600000(, .*)?\}",
        run.stdout.splitlines()[1],
    ), run.stdout
    alter = configs(
        kafka, "--alter", "--entity-type", "topics", "--entity-name", "cfg",
        "--add-config", "segment.ms=100000,cleanup.policy=[compact,delete]", "--delete-config", "retention.ms",
    )  # fmt: skip
    assert alter.returncode == 0, alter.stderr
    assert alter.stdout == "Completed updating config for topic cfg.\n"
    lines = configs(kafka, "--describe", "--topic", "cfg").stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic cfg are:"
    assert [line.split(" ")[2] for line in lines[1:]] == ["cleanup.policy=compact,delete", "segment.ms=100000"]
    assert lines[1].startswith("  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:")
    # --all: every config with its source, sorted by name
    every = configs(kafka, "--describe", "--topic", "cfg", "--all").stdout.splitlines()
    assert every[0] == "All configs for topic cfg are:"
    names = [line.split("=", 1)[0].strip() for line in every[1:]]
    assert names == sorted(names) and "max.message.bytes" in names
    assert any(
        re.fullmatch(r"  retention\.ms=\d+ sensitive=false synonyms=\{(?!DYNAMIC_TOPIC_CONFIG).*\}", x) for x in every
    )
    # deleting a config the topic does not override fails like Kafka's, nothing applied
    bad = configs(kafka, "--alter", "--topic", "cfg", "--delete-config", "retention.ms")
    assert bad.returncode == 1 and bad.stderr == "Invalid config(s): retention.ms specified for topics cfg\n"


def test_configs_groups_brokers_and_errors(kafka):
    alter = configs(kafka, "--alter", "--entity-type", "groups", "--entity-name", "g1", "--add-config",
                    "consumer.session.timeout.ms=50000")  # fmt: skip
    assert alter.returncode == 0, alter.stderr
    assert alter.stdout == "Completed updating config for group g1.\n"
    assert configs(kafka, "--describe", "--group", "g1").stdout.splitlines() == [
        "Dynamic configs for group g1 are:",
        "  consumer.session.timeout.ms=50000 sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000}",
    ]
    brokers = configs(kafka, "--describe", "--entity-type", "brokers")
    assert brokers.returncode == 0, brokers.stderr
    assert brokers.stdout.splitlines()[0] == "Dynamic configs for broker 1 are:"
    assert "Default configs for brokers in the cluster are:" in brokers.stdout.splitlines()
    every = configs(kafka, "--describe", "--broker", "1", "--all").stdout.splitlines()
    assert every[0] == "All configs for broker 1 are:"
    # Kafka lists every synonym in precedence order, the definition default last
    assert "  node.id=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:node.id=1, DEFAULT_CONFIG:node.id=-1}" in every
    default = configs(kafka, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                      "log.cleaner.min.cleanable.ratio=0.5")  # fmt: skip
    assert default.returncode == 0, default.stderr
    assert default.stdout == "Completed updating default config for brokers in the cluster.\n"
    for argv, message in [
        (["--describe", "--entity-type", "broker-loggers", "--entity-name", "1"], "broker-loggers is not supported"),
        (["--describe", "--entity-type", "brokers", "--entity-name", "x"], "must be a valid integer broker id"),
        (["--describe", "--entity-type", "topics", "--entity-name", "missing"], "UnknownTopicOrPartitionError"),
        (["--alter", "--topic", "cfg"], "At least one of --add-config or --delete-config"),
        (["--alter", "--topic", "cfg", "--add-config", "novalue"], 'must be in the format "key=val"'),
    ]:
        run = configs(kafka, *argv)
        assert run.returncode == 1, argv
        assert message in run.stderr and len(run.stderr.splitlines()) == 1, run.stderr
    unreachable = tool("config_command", "--bootstrap-server", "127.0.0.1:1,127.0.0.1:2", "--describe", "--topic", "t")
    assert unreachable.returncode == 1 and len(unreachable.stderr.splitlines()) == 1


def get_offsets(kafka, *args: str) -> subprocess.CompletedProcess:
    return tool("get_offset_shell", "--bootstrap-server", kafka.bootstrap, *args)


def test_get_offsets_latest_earliest_timestamps_and_filters(kafka):
    from confluent_kafka import Producer

    create(kafka, "offs", 3)
    base = (int(time.time()) - 600) * 1000
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    for i in range(3):
        producer.produce("offs", value=b"v", partition=0, timestamp=base + 1000 * i)
    producer.produce("offs", value=b"v", partition=1, timestamp=base)
    assert producer.flush(30) == 0
    assert get_offsets(kafka, "--topic", "offs").stdout == "offs:0:3\noffs:1:1\noffs:2:0\n"
    for latest in ("-1", "latest"):
        assert get_offsets(kafka, "--topic", "offs", "--time", latest).stdout == "offs:0:3\noffs:1:1\noffs:2:0\n"
    for earliest in ("-2", "earliest"):
        assert get_offsets(kafka, "--topic", "offs", "--time", earliest).stdout == "offs:0:0\noffs:1:0\noffs:2:0\n"
    # the first offset whose timestamp is >= the time; none after the last record (the partition is left out)
    assert get_offsets(kafka, "--topic", "offs", "--time", str(base + 1000)).stdout == "offs:0:1\n"
    assert get_offsets(kafka, "--topic", "offs", "--time", str(base + 500), "--partitions", "0,1").stdout == (
        "offs:0:1\n"
    )
    assert get_offsets(kafka, "--topic", "offs", "--time", str(base + 60_000)).stdout == ""
    assert get_offsets(kafka, "--topic", "offs", "--time", "max-timestamp").stdout == "offs:0:2\noffs:1:0\n"
    assert get_offsets(kafka, "--topic", "of.*", "--partitions", "2,0").stdout == "offs:0:3\noffs:2:0\n"
    assert get_offsets(kafka, "--topic-partitions", "offs:1-,nothing.*").stdout == "offs:1:1\noffs:2:0\n"
    every = get_offsets(kafka).stdout.splitlines()
    assert {"offs:0:3", "offs:1:1", "offs:2:0"} <= set(every)
    keys = [(line.rsplit(":", 2)[0], int(line.rsplit(":", 2)[1])) for line in every]
    assert keys == sorted(keys)
    for argv, message in [
        (
            ["--topic", "no-such-topic"],
            "Error occurred: Could not match any topic-partitions with the specified filters",
        ),
        (["--topic", "offs", "--time", "yesterday"], "Error occurred: Malformed time argument yesterday. "),
        (["--topic", "offs", "--partitions", "a"], "Error occurred: --partitions expects a comma separated list"),
        (["--topic", "offs", "--topic-partitions", "offs:1"], "Error occurred: --topic-partitions cannot be used"),
    ]:
        run = get_offsets(kafka, *argv)
        assert run.returncode == 1 and run.stdout == "", argv
        assert run.stderr.startswith(message) and len(run.stderr.splitlines()) == 1, run.stderr


def test_broker_api_versions(kafka):
    from pykbroker.protocol import REQUESTS

    run = tool("broker_api_versions_command", "--bootstrap-server", f"127.0.0.1:1,{kafka.bootstrap}")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == f"{kafka.bootstrap} (id: 1 rack: null) -> (" and lines[-1] == ")"
    entries = lines[1:-1]
    assert all(e.endswith(",") for e in entries[:-1]) and not entries[-1].endswith(",")
    parsed = [
        re.fullmatch(r"\t(\w+)\((\d+)\): (?:(\d+)(?: to (\d+))? \[usable: (\d+)\]|(UNSUPPORTED)),?", e) for e in entries
    ]
    assert all(parsed), entries
    keys = [int(m.group(2)) for m in parsed]
    assert keys == sorted(keys) and set(REQUESTS) <= set(keys)
    by_name = {m.group(1): m for m in parsed}
    produce, api_versions = by_name["Produce"], by_name["ApiVersions"]
    assert produce.group(2) == "0" and api_versions.group(2) == "18" and not api_versions.group(6)
    for m in parsed:
        if not m.group(6):
            hi = int(m.group(4) or m.group(3))
            assert int(m.group(5)) == min(hi, REQUESTS[int(m.group(2))].versions[-1]), m.group(0)
    down = tool("broker_api_versions_command", "--bootstrap-server", "127.0.0.1:1")
    assert down.returncode == 1 and down.stdout == "" and len(down.stderr.splitlines()) == 1, down.stderr


def test_node_api_versions_text_marks_unusable_unsupported_and_unknown():
    from pykbroker.tools.broker_api_versions_command import node_api_versions_text

    ours = {0: (3, 11), 1: (4, 17), 3: (0, 12), 18: (0, 4)}
    offered = [
        {"api_key": 0, "min_version": 12, "max_version": 13},
        {"api_key": 1, "min_version": 0, "max_version": 3},
        {"api_key": 18, "min_version": 0, "max_version": 0},
        {"api_key": 999, "min_version": 0, "max_version": 2},
    ]
    assert node_api_versions_text(offered, ours) == (
        "(\n\tProduce(0): 12 to 13 [unusable: node too new],\n\tFetch(1): 0 to 3 [unusable: node too old],"
        "\n\tMetadata(3): UNSUPPORTED,\n\tApiVersions(18): 0 [usable: 0],\n\tUNKNOWN(999): 0 to 2\n)"
    )


def topics(kafka, *args: str) -> subprocess.CompletedProcess:
    return tool("topic_command", "--bootstrap-server", kafka.bootstrap, *args)


def partition_line(topic: str, p: int) -> str:
    return f"\tTopic: {topic}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: "


def test_topics_alter_partitions(kafka):
    create(kafka, "grow", 1)
    run = topics(kafka, "--alter", "--topic", "grow", "--partitions", "3")
    assert run.returncode == 0 and run.stdout == "", run.stderr
    lines = topics(kafka, "--describe", "--topic", "grow").stdout.splitlines()
    assert "\tPartitionCount: 3\t" in lines[0]
    assert lines[1:] == [partition_line("grow", p) for p in range(3)]
    fewer = topics(kafka, "--alter", "--topic", "grow", "--partitions", "2")
    assert fewer.returncode == 1 and fewer.stderr.startswith("Error while executing topic command : ")
    assert len(fewer.stderr.splitlines()) == 1
    missing = topics(kafka, "--alter", "--topic", "no-such", "--partitions", "2")
    assert missing.returncode == 1
    assert missing.stderr == "Error while executing topic command : Topic 'no-such' does not exist as expected\n"
    assert topics(kafka, "--alter", "--topic", "no-such", "--partitions", "2", "--if-exists").returncode == 0
    no_topic = topics(kafka, "--alter", "--partitions", "2")
    assert no_topic.returncode == 1 and no_topic.stderr == 'Missing required argument "[topic]"\n'
    no_count = topics(kafka, "--alter", "--topic", "grow")
    assert no_count.returncode == 1 and no_count.stderr == 'Missing required argument "[partitions]"\n'
    config = topics(kafka, "--alter", "--topic", "grow", "--partitions", "4", "--config", "retention.ms=1")
    assert config.returncode == 1 and "use kafka-configs" in config.stderr
    assert "\tPartitionCount: 3\t" in topics(kafka, "--describe", "--topic", "grow").stdout


def test_topics_describe_report_filters(kafka):
    create(kafka, "minisr", 2, "min.insync.replicas=2")
    create(kafka, "plain", 2)
    # one replica in sync, min.insync.replicas=2: under min ISR; everything else at min ISR (1)
    under = topics(kafka, "--describe", "--under-min-isr-partitions")
    assert under.returncode == 0, under.stderr
    assert under.stdout.splitlines() == [partition_line("minisr", 0), partition_line("minisr", 1)]
    at = topics(kafka, "--describe", "--topic", "plain|minisr", "--at-min-isr-partitions")
    assert at.stdout.splitlines() == [partition_line("plain", 0), partition_line("plain", 1)]
    # a single live broker leading every partition with a full ISR: nothing under-replicated or unavailable
    for option in ("--under-replicated-partitions", "--unavailable-partitions"):
        run = topics(kafka, "--describe", option)
        assert run.returncode == 0 and run.stdout == "", (option, run.stderr)
    overrides = topics(kafka, "--describe", "--topics-with-overrides").stdout.splitlines()
    assert all(line.startswith("Topic: ") and not line.endswith("Configs: ") for line in overrides), overrides
    assert any(
        line.startswith("Topic: minisr\t") and line.endswith("\tConfigs: min.insync.replicas=2") for line in overrides
    )
    assert not any(line.startswith("Topic: plain\t") for line in overrides)
    both = topics(kafka, "--describe", "--under-replicated-partitions", "--unavailable-partitions")
    assert both.returncode == 1
    assert (
        both.stderr == 'Option "[under-replicated-partitions]" can\'t be used with option "[unavailable-partitions]"\n'
    )
    assert topics(kafka, "--list", "--unavailable-partitions").returncode == 1


def test_topics_report_filter_logic():
    from argparse import Namespace

    from pykbroker.tools.topic_command import REPORT_OPTIONS, _partition_reported

    def only(option: str) -> Namespace:
        return Namespace(**{o: o == option for o in REPORT_OPTIONS})

    healthy = {"leader_id": 1, "replica_nodes": [1, 2, 3], "isr_nodes": [1, 2, 3]}
    lagging = {"leader_id": 1, "replica_nodes": [1, 2, 3], "isr_nodes": [1]}
    leaderless = {"leader_id": -1, "replica_nodes": [1, 2, 3], "isr_nodes": [2]}
    dead_leader = {"leader_id": 4, "replica_nodes": [4, 2], "isr_nodes": [4, 2]}
    live = {1, 2, 3}
    assert _partition_reported(only("none"), healthy, 2, live)  # no report option: every partition
    rows = {
        "under_replicated_partitions": [False, True, True, False],
        "under_min_isr_partitions": [False, True, True, False],
        "at_min_isr_partitions": [False, False, False, True],
        "unavailable_partitions": [False, False, True, True],
    }
    for option, expected in rows.items():
        got = [_partition_reported(only(option), p, 2, live) for p in (healthy, lagging, leaderless, dead_leader)]
        assert got == expected, option


def _current_venv(tmp_path: Path) -> Path:
    """A stand-in for bin/_venv.sh's virtualenv that is already current (its stamp matches this checkout), whose
    python is the one running the tests: the scripts run without creating or reinstalling any virtualenv."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    stamp = subprocess.run(
        ["sh", "-c", "cat setup.cfg pyproject.toml | cksum"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    (venv / ".pykbroker-installed").write_text(stamp)
    return venv


def test_every_bin_tool_has_its_kafka_sh_name(kafka, tmp_path):
    tools = sorted(p.name for p in (ROOT / "bin").iterdir() if p.name.startswith("kafka-") and p.suffix != ".sh")
    assert {"kafka-topics", "kafka-configs", "kafka-server-start"} <= set(tools)
    for name in tools:
        sh = ROOT / "bin" / f"{name}.sh"
        assert sh.resolve() == (ROOT / "bin" / name).resolve() and os.access(sh, os.X_OK), name
    create(kafka, "via-sh", 1)
    env = dict(os.environ, PYKBROKER_VENV=str(_current_venv(tmp_path)))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "kafka-topics.sh").symlink_to(ROOT / "bin" / "kafka-topics.sh")  # a link to the link, elsewhere
    for script in (ROOT / "bin" / "kafka-topics.sh", elsewhere / "kafka-topics.sh"):
        run = subprocess.run(
            [str(script), "--bootstrap-server", kafka.bootstrap, "--list"],
            env=env,
            cwd=str(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        assert "via-sh" in run.stdout.splitlines() and "installing" not in run.stderr, run.stderr
    usage = subprocess.run(
        [str(ROOT / "bin" / "kafka-get-offsets.sh"), "--bootstrap-server", kafka.bootstrap, "--topic", "via-sh"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert usage.returncode == 0 and usage.stdout == "via-sh:0:0\n", usage.stderr


def groups(kafka, *args: str) -> subprocess.CompletedProcess:
    return tool("consumer_group_command", "--bootstrap-server", kafka.bootstrap, *args)


def test_consumer_groups_state_and_all_groups(kafka):
    from confluent_kafka import Producer

    create(kafka, "grouped", 2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(4):
        producer.produce("grouped", value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    done = tool(
        "console_consumer", "--bootstrap-server", kafka.bootstrap, "--topic", "grouped", "--group", "idle-group",
        "--from-beginning", "--max-messages", "4",
    )  # fmt: skip
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 4, done.stderr
    live = subprocess.Popen(
        [sys.executable, "-m", "pykbroker.tools.console_consumer", "--bootstrap-server", kafka.bootstrap,
         "--topic", "grouped", "--group", "a-live-consumer-group-name"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(
            lambda: "a-live-consumer-group-name           Stable" in groups(kafka, "--list", "--state").stdout,
            30,
            message="live group Stable",
        )
        listed = groups(kafka, "--list", "--state").stdout.splitlines()
        width = len("a-live-consumer-group-name") + 10  # Kafka: longest id (at least 15) + 10
        assert listed[0] == "GROUP".ljust(width) + " " + "STATE".ljust(20)
        assert "a-live-consumer-group-name".ljust(width) + " " + "Stable".ljust(20) in listed
        assert "idle-group".ljust(width) + " " + "Empty".ljust(20) in listed
        only_stable = groups(kafka, "--list", "--state", "stable").stdout.splitlines()
        assert "a-live-consumer-group-name".ljust(width) + " " + "Stable".ljust(20) in only_stable
        assert not any(line.startswith("idle-group ") for line in only_stable)
        assert groups(kafka, "--list").stdout.splitlines() == sorted(groups(kafka, "--list").stdout.splitlines())

        state = groups(kafka, "--describe", "--group", "a-live-consumer-group-name", "--state")
        assert state.returncode == 0, state.stderr
        coordinator = f"{kafka.bootstrap}  (1)"
        head = f"{'GROUP':<26} {'COORDINATOR (ID)':<{max(25, len(coordinator))}} {'ASSIGNMENT-STRATEGY':<20} "
        assert state.stdout.splitlines() == [
            "",
            head + f"{'STATE':<20} #MEMBERS",
            f"a-live-consumer-group-name {coordinator:<25} {'range':<20} {'Stable':<20} 1",
        ]
        idle = groups(kafka, "--describe", "--group", "idle-group", "--state")
        assert idle.stdout.splitlines()[2] == f"{'idle-group':<15} {coordinator:<25} {'-':<20} {'Empty':<20} 0"
        assert "Consumer group 'idle-group' has no active members." in idle.stderr

        every = groups(kafka, "--describe", "--all-groups", "--state").stdout
        assert "\na-live-consumer-group-name " in every and "\nidle-group " in every
        offsets = groups(kafka, "--describe", "--all-groups").stdout.splitlines()
        assert any(re.match(r"idle-group +grouped +0 +2 +2 +0 ", line) for line in offsets), offsets
        assert any(line.startswith("a-live-consumer-group-name grouped ") for line in offsets), offsets
    finally:
        live.terminate()
        live.wait(30)
    for argv, message in [
        (["--list", "--all-groups"], 'Option "[all-groups]" can\'t be used with option "[list]"'),
        (["--describe", "--all-groups", "--group", "g"], 'Option "[all-groups]" can\'t be used with option "[group]"'),
        (["--describe"], "Option [describe|delete|reset-offsets] takes one of these options: [all-groups], [group]"),
        (["--list", "--state", "bogus"], "Invalid state list 'bogus'. Valid states are: PreparingRebalance, "),
    ]:
        run = groups(kafka, *argv)
        assert run.returncode == 1 and run.stderr.startswith(message), (argv, run.stderr)


def test_console_consumer_include_regex(kafka):
    from confluent_kafka import Producer

    for topic in ("inc-a", "inc-b", "other-inc-c"):
        create(kafka, topic, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for topic in ("inc-a", "inc-b", "other-inc-c"):
        producer.produce(topic, value=f"from {topic}".encode())
    assert producer.flush(30) == 0
    bs = ["--bootstrap-server", kafka.bootstrap]
    run = tool(
        "console_consumer", *bs, "--include", "inc-.*", "--from-beginning", "--max-messages", "2",
        "--timeout-ms", "30000", "--property", "print.partition=true",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert sorted(run.stdout.splitlines()) == ["Partition:0\tfrom inc-a", "Partition:0\tfrom inc-b"]
    assert "Processed a total of 2 messages" in run.stderr
    # a topic created after the consumer started joins the subscription (looked up every second while none matches)
    late = subprocess.Popen(
        [sys.executable, "-m", "pykbroker.tools.console_consumer", *bs, "--include", "late-.*,also-late",
         "--from-beginning", "--max-messages", "1", "--timeout-ms", "60000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        create(kafka, "also-late", 1)
        producer.produce("also-late", value=b"late record")
        assert producer.flush(30) == 0
        out, err = late.communicate(timeout=60)
    finally:
        if late.poll() is None:
            late.kill()
            late.wait(10)
    assert late.returncode == 0 and out == "late record\n", err
    for argv, message in [
        (["--topic", "inc-a", "--include", "inc-.*"], "Exactly one of --include/--topic is required."),
        ([], "Exactly one of --include/--topic is required."),
        (["--include", "inc-.*", "--partition", "0"], "The topic is required when partition is specified."),
    ]:
        bad = tool("console_consumer", *bs, *argv)
        assert bad.returncode == 1 and bad.stderr == message + "\n", (argv, bad.stderr)


@pytest.mark.parametrize(
    "module",
    [
        "topic_command",
        "config_command",
        "get_offset_shell",
        "broker_api_versions_command",
        "consumer_group_command",
        "console_consumer",
        "console_producer",
        "delete_records_command",
        "producer_performance",
        "storage_tool",
    ],
)
def test_bad_arguments_exit_1_as_kafka_tools_do(module):
    run = tool(module, "--no-such-option")
    assert run.returncode == 1 and run.stdout == "", run
    assert "error: " in run.stderr.splitlines()[-1], run.stderr
