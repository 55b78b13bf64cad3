"""Many topics at once: CreateTopics is answered once the controller committed them (as in KRaft
Kafka); Metadata shows them from the metadata image while the broker's metadata publisher creates their
logs (Kafka's order), and an orderly shutdown stops that publishing first, so no log is created after the
log directories were shut down cleanly and the next start finds every index."""

from __future__ import annotations

import time

import pytest

from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

# A created log: its segment and, written once it leads, its leader epochs (a new log's index files are created on
# first use; a restart must still find no corrupt or missing index).
SEGMENT_FILES = ("00000000000000000000.log", "leader-epoch-checkpoint")


def _create(bootstrap: str, names: list[str]):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(n, 1, 1) for n in names], request_timeout=60, operation_timeout=60)
    for f in futures.values():
        f.result(60)
    return admin


def _served(admin, names: list[str]) -> int:
    """How many of ``names`` Metadata lists with a leader."""
    topics = admin.list_topics(timeout=10).topics
    return sum(
        1
        for n in names
        if n in topics and topics[n].error is None and all(p.leader == 1 for p in topics[n].partitions.values())
    )


def _missing_files(logs, names: list[str]) -> list[str]:
    return [n for n in names if not all((logs / f"{n}-0" / f).exists() for f in SEGMENT_FILES)]


def test_created_topics_are_listed_with_their_logs(broker):
    names = [f"many-{i}" for i in range(500)]
    admin = _create(broker.bootstrap, names)  # one CreateTopics request
    wait_until(lambda: _served(admin, names) == len(names), 15, message="all 500 topics listed with a leader")
    wait_until(lambda: _missing_files(broker.data_dir / "logs", names) == [], 30, message="every log created")


def test_sigterm_during_the_topic_creation_backlog(broker_factory):
    b = broker_factory()
    names = [f"backlog-{i}" for i in range(1000)]
    _create(b.bootstrap, names)
    start = time.monotonic()
    assert b.stop(30) == 0  # at once: the broker is still creating those logs
    assert time.monotonic() - start < 10
    out = b.lines
    clean = [i for i, line in enumerate(out) if "Log directory shut down cleanly" in line]
    assert clean, b.output()[-3000:]
    assert not [line for line in out[clean[-1] :] if "Created log" in line]
    logs = b.data_dir / "logs"
    created = [n for n in names if (logs / f"{n}-0").exists()]
    assert _missing_files(logs, created) == []

    first = len(b.lines)
    b.start()
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    wait_until(lambda: _served(admin, names) == len(names), 20, message="all 1000 topics listed after restart")
    wait_until(lambda: _missing_files(logs, names) == [], 30, message="every log created after restart")
    restart = b.lines[first:]
    assert not [line for line in restart if "corrupt or missing index" in line or "No clean shutdown" in line]
