"""Definitions that vulture (bin/run-lint's dead-code check, [tool.vulture] in pyproject.toml) cannot see used:
they are called from outside this tree. Each line names one, through its real class so that a rename fails
tests/unit/test_dead_code_whitelist.py (which runs this file), with the reason it stays. Add to it only what is used
from outside; anything else unreferenced is dead code to remove."""

import sys

from pykbroker import testing
from pykbroker.clients.consumer.kafka_consumer import KafkaConsumer
from pykbroker.clients.producer.kafka_producer import KafkaProducer
from pykbroker.testing import pytest_plugin
from tests.helpers.oauth import IdpRequestHandler

# Kafka's client API, for users of pykbroker's own clients (README: the tools and benchmarks drive them).
KafkaConsumer.assign_topic  # the module docstring's usage example
KafkaConsumer.end_offsets  # KafkaConsumer.endOffsets
KafkaConsumer.beginning_offsets  # KafkaConsumer.beginningOffsets
KafkaProducer.partitions_for  # KafkaProducer.partitionsFor

# Python and pytest call these by name.
sys.pycache_prefix  # tests/conftest.py sets where this interpreter writes bytecode (the import system reads it)
testing.__getattr__  # PEP 562 lazy import of EmbeddedKafka
pytest_plugin.pytest_configure  # the plugin's hook (entry point pytest11)
IdpRequestHandler.do_GET  # http.server's BaseHTTPRequestHandler dispatches by method name
IdpRequestHandler.do_POST
IdpRequestHandler.log_message

# PySpark's Python data source API calls these (spark/ is installed apart, with pyspark).
try:
    from pyspark_pykbroker.source import KafkaStreamReader, PyKBrokerDataSource
except ImportError:
    pass
else:
    PyKBrokerDataSource.streamReader
    PyKBrokerDataSource.streamWriter
    KafkaStreamReader.initialOffset
    KafkaStreamReader.getDefaultReadLimit
    KafkaStreamReader.prepareForTriggerAvailableNow
    KafkaStreamReader.latestOffset
