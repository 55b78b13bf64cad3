"""kafka-topics, kafka-console-producer and kafka-console-consumer against a real broker (issue 6)."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.helpers.tools import run_tool

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(module_broker):
    """The module's one broker: each test creates and checks topics of its own ("orders", "lines")."""
    return module_broker


def tool(module: str, *args: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_tool(module, *args, stdin=stdin, text=False, timeout=timeout)


def test_kafka_topics_create_list_describe_delete(broker):
    bs = ["--bootstrap-server", broker.bootstrap]
    run = tool(
        "topic_command",
        *bs,
        "--create",
        "--topic",
        "orders",
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=60000",
        "--config",
        "segment.bytes=1048576",
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.decode() == "Created topic orders.\n"
    again = tool("topic_command", *bs, "--create", "--topic", "orders", "--partitions", "3")
    assert again.returncode == 1
    assert again.stderr.decode().startswith("Error while executing topic command : ")
    assert tool("topic_command", *bs, "--create", "--topic", "orders", "--if-not-exists").returncode == 0
    assert "orders" in tool("topic_command", *bs, "--list").stdout.decode().splitlines()
    lines = tool("topic_command", *bs, "--describe", "--topic", "orders").stdout.decode().splitlines()
    assert re.fullmatch(
        r"Topic: orders\tTopicId: [\w-]{22}\tPartitionCount: 3\tReplicationFactor: 1\t"
        r"Configs: (retention\.ms=60000,segment\.bytes=1048576|segment\.bytes=1048576,retention\.ms=60000)",
        lines[0],
    ), lines[0]
    assert lines[1:] == [
        f"\tTopic: orders\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: " for p in range(3)
    ]
    assert tool("topic_command", *bs, "--delete", "--topic", "orders").returncode == 0
    missing = tool("topic_command", *bs, "--describe", "--topic", "orders")
    assert missing.returncode == 1 and b"does not exist" in missing.stderr


def test_console_producer_to_console_consumer(broker):
    bs = ["--bootstrap-server", broker.bootstrap]
    assert tool("topic_command", *bs, "--create", "--topic", "lines", "--partitions", "1").returncode == 0
    lines = b"".join(b"k%d:value %d\n" % (i, i) for i in range(100))
    run = tool(
        "console_producer",
        *bs,
        "--topic",
        "lines",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        stdin=lines,
    )
    assert run.returncode == 0, run.stderr
    out = tool(
        "console_consumer",
        *bs,
        "--topic",
        "lines",
        "--from-beginning",
        "--max-messages",
        "100",
        "--property",
        "print.key=true",
        "--property",
        "print.offset=true",
        "--property",
        "key.separator=|",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().splitlines() == [f"Offset:{i}|k{i}|value {i}" for i in range(100)]
    assert "Processed a total of 100 messages" in out.stderr.decode()
    part = tool(
        "console_consumer", *bs, "--topic", "lines", "--partition", "0", "--offset", "95", "--timeout-ms", "1500"
    )
    assert part.stdout.decode().splitlines() == [f"value {i}" for i in range(95, 100)]
    # --group: a later consumer in the same group resumes after the committed offsets.
    first = tool(
        "console_consumer", *bs, "--topic", "lines", "--group", "cg", "--from-beginning", "--max-messages", "100"
    )
    assert first.stdout.decode().splitlines() == [f"value {i}" for i in range(100)], first.stderr
    more = b"".join(b"k:more %d\n" % i for i in range(10))
    assert (
        tool(
            "console_producer",
            *bs,
            "--topic",
            "lines",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
            stdin=more,
        ).returncode
        == 0
    )
    rest = tool(
        "console_consumer", *bs, "--topic", "lines", "--group", "cg", "--from-beginning", "--timeout-ms", "3000"
    )
    assert rest.stdout.decode().splitlines() == [f"more {i}" for i in range(10)], rest.stderr
