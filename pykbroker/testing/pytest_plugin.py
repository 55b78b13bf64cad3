"""pytest plugin (entry point ``pytest11``, name ``pykbroker``): a Kafka broker for a test session.

* ``kafka_broker`` (session scope): a running :class:`~pykbroker.testing.EmbeddedKafka`; use
  ``kafka_broker.bootstrap_servers``.
* ``kafka_topic``: the name of a topic created for the test (one partition; unique per test), deleted
  afterwards. ``@pytest.mark.kafka_topic(partitions=3, config={"cleanup.policy": "compact"})`` shapes it.

Nothing starts unless a test asks for a fixture; importing this module imports no broker code.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pykbroker.testing import EmbeddedKafka


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafka_topic(partitions=1, config=None): the topic of the kafka_topic fixture (pykbroker)"
    )


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[EmbeddedKafka]:
    """A single-node pykbroker for the whole session (in-process, ephemeral port, temporary data)."""
    from pykbroker.testing import EmbeddedKafka

    with EmbeddedKafka() as kafka:
        yield kafka


@pytest.fixture
def kafka_topic(kafka_broker: EmbeddedKafka, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh topic named after the test, created before it and deleted after it."""
    marker = request.node.get_closest_marker("kafka_topic")
    options = dict(marker.kwargs) if marker is not None else {}
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-.")[:200] or "topic"
    name = f"{base}-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name, partitions=options.get("partitions", 1), config=options.get("config"))
    yield name
    if kafka_broker.running:
        try:
            kafka_broker.delete_topic(name)
        except Exception:  # noqa: BLE001 - the broker went away with the test: nothing left to clean
            pass
