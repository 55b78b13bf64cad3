"""Real clients bootstrap against a real broker subprocess (issue 2 acceptance)."""

import asyncio
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(module_broker):
    """The module's one broker: these tests only read from it or open connections of their own, and each
    checks what it did (no topic, group or config they make is seen by another)."""
    return module_broker


def _cluster_id(broker):
    meta = (broker.data_dir / "logs" / "meta.properties").read_text()
    return next(line.split("=", 1)[1] for line in meta.splitlines() if line.startswith("cluster.id="))


def test_kcat_metadata_listing(broker):
    kcat = shutil.which("kcat")
    assert kcat, "kcat must be installed (bin/run-tests and .ci/run install it)"
    out = subprocess.run([kcat, "-b", broker.bootstrap, "-L", "-m", "10"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "1 brokers:" in out.stdout
    assert f"broker 1 at 127.0.0.1:{broker.port}" in out.stdout
    assert "0 topics:" in out.stdout


def test_confluent_kafka_admin_list_topics(broker):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=15)
    assert list(md.brokers) == [1]
    assert md.brokers[1].host == "127.0.0.1" and md.brokers[1].port == broker.port
    assert md.cluster_id == _cluster_id(broker)
    assert md.topics == {}


def test_kafka_python_admin_and_client_bootstrap(broker):
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        cluster = admin.describe_cluster()
        assert cluster["cluster_id"] == _cluster_id(broker)
        assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(1, broker.port)]
        assert admin.list_topics() == []
    finally:
        admin.close()
    # kafka-python 3.x replaced KafkaClient with KafkaNetClient ("drop-in replacement").
    try:
        from kafka import KafkaClient as ClientClass
    except ImportError:
        from kafka.net.compat import KafkaNetClient as ClientClass
    client = ClientClass(bootstrap_servers=broker.bootstrap)
    try:
        # kafka-python infers a broker version from the advertised ApiVersions table.
        assert isinstance(client.check_version(timeout_ms=10000), tuple)
        future = client.cluster.request_update()
        client.poll(future=future, timeout_ms=10000)
        assert {b.node_id for b in client.cluster.brokers()} == {1}
    finally:
        client.close()


def test_aiokafka_client_bootstrap(broker):
    from aiokafka.client import AIOKafkaClient

    async def run():
        client = AIOKafkaClient(bootstrap_servers=broker.bootstrap)
        await client.bootstrap()
        try:
            return {b.nodeId for b in client.cluster.brokers()}
        finally:
            await client.close()

    assert asyncio.run(asyncio.wait_for(run(), 30)) == {1}
