"""Kafka's ``MetricsReporter`` contract and the loading of ``metric.reporters`` classes.

A reporter is built with no arguments, then ``configure(configs)`` (the broker's configuration values),
``init(registry)`` at start-up (it starts exposing; it may bind a port and raise OSError) and ``close()``
at shutdown. ``create_reporters`` turns the ``metric.reporters`` list into configured instances; a
class that cannot be found or is not a reporter is a ConfigException naming the key.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from pykbroker.config.broker_configs.server_configs import METRIC_REPORTERS_CONFIG
from pykbroker.config.config_def import ConfigException
from pykbroker.utils.logging import get_logger
from pykbroker.utils.metrics import MetricsRegistry

# Kafka's own JMX reporter (the default of metric.reporters in Kafka 4.0): there is no JMX in Python, so
# a configuration copied from Kafka that names it starts with a warning instead of failing.
JMX_REPORTER = "org.apache.kafka.common.metrics.JmxReporter"


class MetricsReporter:
    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def init(self, registry: MetricsRegistry) -> None:
        pass

    def close(self) -> None:
        pass


def load_reporter_class(class_name: str, value: str) -> type:
    module_name, _, attr = class_name.rpartition(".")
    try:
        if not module_name:
            raise ImportError(class_name)
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError):
        raise ConfigException(METRIC_REPORTERS_CONFIG, value, f"Class {class_name} cannot be found") from None
    if not (isinstance(cls, type) and issubclass(cls, MetricsReporter)):
        raise ConfigException(
            METRIC_REPORTERS_CONFIG, value, f"{class_name} is not an instance of {MetricsReporter.__name__}"
        )
    return cls


def create_reporters(class_names: list[str], configs: Mapping[str, Any]) -> list[MetricsReporter]:
    """Instantiate and configure every class of ``metric.reporters`` (in order, duplicates once)."""
    value = ",".join(class_names)
    reporters = []
    for class_name in dict.fromkeys(n for n in class_names if n):
        if class_name == JMX_REPORTER:
            get_logger("MetricsReporter").warning(f"{JMX_REPORTER} is not available in pykbroker; ignored")
            continue
        reporter = load_reporter_class(class_name, value)()
        reporter.configure(configs)
        reporters.append(reporter)
    return reporters
