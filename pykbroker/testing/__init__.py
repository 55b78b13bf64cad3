"""A broker for other programs' tests: :class:`EmbeddedKafka` and the pytest plugin (fixtures
``kafka_broker`` and ``kafka_topic``, :mod:`pykbroker.testing.pytest_plugin`)."""

from pykbroker.testing.embedded import EmbeddedKafka

__all__ = ["EmbeddedKafka"]
