"""A broker for other programs' tests: :class:`EmbeddedKafka` and the pytest plugin (fixtures
``kafka_broker`` and ``kafka_topic``, :mod:`pykbroker.testing.pytest_plugin`).

``EmbeddedKafka`` is imported on first use, so loading the pytest plugin (which pytest does for every
session of a project that has pykbroker installed) imports no broker code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pykbroker.testing.embedded import EmbeddedKafka

__all__ = ["EmbeddedKafka"]


def __getattr__(name: str) -> Any:
    if name == "EmbeddedKafka":
        from pykbroker.testing.embedded import EmbeddedKafka

        return EmbeddedKafka
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
