"""Older clients against a Kafka 4 broker: Produce v0-v2 advertised but not served (KAFKA-18659).

librdkafka before 2.10 (Debian's kcat 1.7.1 links librdkafka 2.0.2) compresses a batch only when the broker
advertises Produce v0-v2 (librdkafka issue 4956); without them every batch was stored uncompressed, silently.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest

from pykbroker.clients.broker_connection import BrokerConnection, ConnectionClosedError
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.api_version_manager import BROKER_VERSIONS
from tests.helpers.tools import create_topic_with_tool, run_tool

pytestmark = pytest.mark.integration

CODECS = ["gzip", "snappy", "lz4", "zstd"]
RECORDS = 200


@pytest.fixture(scope="module")
def kafka(module_broker):
    return module_broker


def stored_codecs(kafka, topic: str) -> set[str]:
    """The compression codecs of the batches stored in ``topic``-0, from kafka-dump-log."""
    log = kafka.data_dir / "logs" / f"{topic}-0" / f"{0:020d}.log"
    dump = run_tool("dump_log_segments", "--files", str(log))
    assert dump.returncode == 0, dump.stderr
    codecs = re.findall(r" compresscodec: (\w+) ", dump.stdout)
    assert codecs, dump.stdout
    return set(codecs)


def test_produce_is_advertised_from_v0_but_v0_to_v2_are_not_served(kafka):
    with BrokerConnection.to(kafka.bootstrap) as conn:
        resp = conn.request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        produce = next(k for k in resp["api_keys"] if k["api_key"] == ApiKeys.PRODUCE)
        assert (produce["min_version"], produce["max_version"]) == (0, BROKER_VERSIONS[ApiKeys.PRODUCE][1])
    for version in (0, 2):
        with BrokerConnection.to(kafka.bootstrap) as bad, BrokerConnection.to(kafka.bootstrap) as good:
            # A Produce v<3 request (header v1: key, version, correlation id, client id; then acks, timeout, []).
            payload = struct.pack(">hhih", ApiKeys.PRODUCE, version, 5, 0) + struct.pack(">hii", 1, 1000, 0)
            bad.send_raw(struct.pack(">i", len(payload)) + payload)
            with pytest.raises((ConnectionClosedError, ConnectionResetError)):
                bad.receive_frame()
            again = good.request(ApiKeys.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert again["error_code"] == 0


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
@pytest.mark.parametrize("codec", CODECS)
def test_kcat_batches_are_stored_with_the_codec_asked_for(kafka, codec):
    topic = f"old-kcat-{codec}"
    create_topic_with_tool(kafka.bootstrap, topic, 1)
    lines = b"".join(b"record-%06d-%s\n" % (i, b"x" * 24) for i in range(RECORDS))
    run = subprocess.run(
        [shutil.which("kcat"), "-P", "-b", kafka.bootstrap, "-t", topic, "-p", "0", "-z", codec, "-X", "linger.ms=50"],
        input=lines,
        capture_output=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr.decode()
    assert b"does not support compression" not in run.stderr, run.stderr.decode()
    assert stored_codecs(kafka, topic) == {codec}
    back = subprocess.run(
        [shutil.which("kcat"), "-C", "-b", kafka.bootstrap, "-t", topic, "-o", "beginning", "-e", "-c", str(RECORDS)],
        capture_output=True,
        timeout=60,
    )
    assert back.stdout.splitlines() == lines.splitlines()


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_batches_are_stored_with_the_codec_asked_for(kafka, codec):
    from confluent_kafka import Producer

    topic = f"old-ck-{codec}"
    create_topic_with_tool(kafka.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "compression.type": codec, "linger.ms": 50})
    for i in range(RECORDS):
        producer.produce(topic, value=b"record-%06d-%s" % (i, b"x" * 24), partition=0)
    assert producer.flush(30) == 0
    assert stored_codecs(kafka, topic) == {codec}
