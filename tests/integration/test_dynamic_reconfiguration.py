"""Dynamic broker configs applied to running brokers, as Kafka's DynamicBrokerConfig does: num.network.threads
adds and removes Processors on a live listener (Kafka's addProcessors/removeProcessors), num.replica.fetchers
re-spreads the follower partitions over a new number of fetcher threads, and a listener's keystore is
rotated without a restart (new TLS connections get the new certificate, connections already made keep
theirs). Observed through the brokers' Prometheus endpoints (Kafka's per-Processor IdlePercent and per-thread
FetcherStats metrics), real clients and the ssl module."""

from __future__ import annotations

import re
import socket
import ssl
import struct
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.broker_configs import alter_broker_configs
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

REPORTER = {
    "metric_reporters": "pykbroker.metrics.prometheus.PrometheusReporter",
    "prometheus_metrics_listener": "127.0.0.1:0",
}
SET, DELETE = 0, 1


def metrics_url(broker) -> str:
    line = broker.wait_for_line(r"Prometheus metrics endpoint listening on \S+:\d+")
    assert line is not None, broker.output()
    host, port = re.search(r"listening on (\S+):(\d+)", line).groups()
    return f"http://{host}:{port}/metrics"


def labels_of(url: str, name: str, label: str) -> dict[str, float]:
    page = urllib.request.urlopen(url, timeout=10).read().decode()
    return {
        s.labels[label]: s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
        if s.name == name and label in s.labels
    }


alter = alter_broker_configs


def api_versions_ok(conn: BrokerConnection) -> bool:
    try:
        return conn.request(ApiKeys.API_VERSIONS, 0, {})["error_code"] == errors.NONE
    except (OSError, ConnectionError, EOFError):
        return False


def test_num_network_threads_resizes_a_live_listener(broker_factory):
    from confluent_kafka import Producer

    from tests.helpers.topics import create_topic

    broker = broker_factory(**REPORTER)  # num.network.threads=2: Processors 0, 1 (PLAINTEXT), 2 (CONTROLLER)
    url = metrics_url(broker)

    def processors() -> set[str]:
        return set(labels_of(url, "kafka_network_processor_idlepercent", "networkProcessor"))

    assert processors() == {"0", "1", "2"}
    create_topic(broker.bootstrap, "resize", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    delivered: list[object] = []

    def produce_one() -> None:
        producer.produce("resize", b"v", on_delivery=lambda e, m: delivered.append(e))
        assert producer.flush(30) == 0 and delivered[-1] is None, delivered[-1]

    produce_one()
    before = [BrokerConnection.to(broker.bootstrap, client_id=f"before-{i}") for i in range(4)]
    try:
        assert alter(broker.bootstrap, "", ("num.network.threads", SET, "4")) == (errors.NONE, None)
        wait_until(lambda: processors() == {"0", "1", "2", "3", "4"}, 15, message="Processors 3 and 4 added")
        assert all(api_versions_ok(c) for c in before)
        produce_one()
        after = [BrokerConnection.to(broker.bootstrap, client_id=f"after-{i}") for i in range(4)]
        assert all(api_versions_ok(c) for c in after)  # served by the old and the new Processors

        # Kafka's bounds: at most double, at least half of the current count
        assert alter(broker.bootstrap, "", ("num.network.threads", SET, "9")) == (
            errors.INVALID_REQUEST,
            "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update validation "
            "failed for num.network.threads=9, value should not be greater than double the current value 4 for "
            "configuration Invalid dynamic configuration",
        )

        # back to 2: the newest Processors are removed and close their connections; the others keep theirs
        # (asked on a connection of Processor 0 or 1: one of a removed Processor may lose its answer)
        assert alter(broker.bootstrap, "", ("num.network.threads", DELETE, None), conn=before[0]) == (errors.NONE, None)
        wait_until(lambda: processors() == {"0", "1", "2"}, 15, message="Processors 3 and 4 removed")
        assert all(api_versions_ok(c) for c in before)  # on Processors 0 and 1
        closed = [c for c in after if not api_versions_ok(c)]
        assert 1 <= len(closed) <= 3, "the connections of the removed Processors are closed"
        with BrokerConnection.to(broker.bootstrap, client_id="new") as fresh:
            assert api_versions_ok(fresh)
        produce_one()  # the producer reconnects if its connection was on a removed Processor
        for c in after:
            c.close()
    finally:
        for c in before:
            c.close()


def test_num_replica_fetchers_resizes_the_fetcher_threads(tmp_path):
    from confluent_kafka import Producer

    from pykbroker.server.replica_fetcher_manager import fetcher_id
    from tests.helpers.cluster import KRaftCluster

    cluster = KRaftCluster(tmp_path, controllers=1, brokers=2, **REPORTER).start()
    try:
        urls = {node: metrics_url(b) for node, b in cluster.brokers.items()}
        topic = "fetchers"
        # each broker leads two partitions (one of each parity, so two fetcher ids once there are two
        # fetchers) and follows the other two
        assignment = [[102, 101], [102, 101], [101, 102], [101, 102]]
        with BrokerConnection.to(cluster.bootstrap, timeout=20) as c:
            created = c.request(
                ApiKeys.CREATE_TOPICS,
                7,
                {
                    "topics": [
                        {
                            "name": topic,
                            "num_partitions": -1,
                            "replication_factor": -1,
                            "assignments": [
                                {"partition_index": p, "broker_ids": ids} for p, ids in enumerate(assignment)
                            ],
                            "configs": [],
                        }
                    ],
                    "timeout_ms": 10000,
                    "validate_only": False,
                },
            )
        assert created["topics"][0]["error_code"] == errors.NONE, created
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
        produced = [0]

        def produce_and_replicate(n: int = 10) -> None:
            for p in range(len(assignment)):
                for _ in range(n):
                    producer.produce(topic, b"v", partition=p)
            assert producer.flush(30) == 0
            produced[0] += n

            def replicated() -> bool:
                for url in urls.values():
                    leo = labels_of(url, "kafka_log_log_logendoffset", "partition")
                    if [leo.get(str(p)) for p in range(len(assignment))] != [produced[0]] * len(assignment):
                        return False
                return True

            wait_until(replicated, 30, message=f"{produced[0]} records on both replicas of every partition")

        def fetchers(node: int) -> set[str]:
            return set(labels_of(urls[node], "kafka_server_fetcherstats_requests_total", "clientId"))

        def expected(node: int, count: int) -> set[str]:
            leader = 203 - node
            followed = [p for p, replicas in enumerate(assignment) if replicas[0] == leader]
            return {f"ReplicaFetcherThread-{fetcher_id(topic, p, count)}-{leader}" for p in followed}

        produce_and_replicate()
        assert fetchers(101) == expected(101, 1) == {"ReplicaFetcherThread-0-102"}
        assert fetchers(102) == expected(102, 1) == {"ReplicaFetcherThread-0-101"}

        assert alter(cluster.bootstrap, "", ("num.replica.fetchers", SET, "2")) == (errors.NONE, None)
        for node in (101, 102):
            assert len(expected(node, 2)) == 2
            wait_until(lambda n=node: fetchers(n) == expected(n, 2), 15, message=f"two fetchers on {node}")
        produce_and_replicate()

        assert alter(cluster.bootstrap, "", ("num.replica.fetchers", DELETE, None)) == (errors.NONE, None)
        for node in (101, 102):
            wait_until(lambda n=node: fetchers(n) == expected(n, 1), 15, message=f"one fetcher on {node}")
        produce_and_replicate()
    finally:
        cluster.stop()


def _recv_exact(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _api_versions_over(sock, correlation_id: int) -> bool:
    """One ApiVersions v0 exchange on an already connected (TLS) socket."""
    client = b"tls-test"
    body = struct.pack(">hhih", ApiKeys.API_VERSIONS, 0, correlation_id, len(client)) + client
    sock.sendall(struct.pack(">i", len(body)) + body)
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    got, error_code = struct.unpack(">ih", _recv_exact(sock, size)[:6])
    return got == correlation_id and error_code == errors.NONE


def _server_certificate(port: int) -> bytes:
    """The DER certificate a new TLS connection to ``port`` is shown."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw) as tls:
        return tls.getpeercert(binary_form=True)


def test_listener_keystore_rotation_without_restart(broker_factory, tmp_path):
    trustme = pytest.importorskip("trustme")
    from confluent_kafka import Producer

    from tests.helpers.topics import create_topic

    names = {"common_name": "broker", "organization_name": "pykbroker", "organization_unit_name": "brokers"}
    ca_a, ca_b = trustme.CA(), trustme.CA()
    certs = {
        "a": ca_a.issue_cert("127.0.0.1", "localhost", **names),
        "b": ca_b.issue_cert("127.0.0.1", "localhost", **names),
        "other-dn": ca_b.issue_cert("127.0.0.1", "localhost", **{**names, "common_name": "someone-else"}),
    }
    files = {}
    for name, cert in certs.items():
        files[name] = str(tmp_path / f"{name}.pem")
        cert.private_key_and_cert_chain_pem.write_to_path(files[name])
    files["ca-b"] = str(tmp_path / "ca-b.pem")
    ca_b.cert_pem.write_to_path(files["ca-b"])
    der = {name: ssl.PEM_cert_to_DER_cert(cert.cert_chain_pems[0].bytes().decode()) for name, cert in certs.items()}

    key = "listener.name.ssl.ssl.keystore.location"
    broker = broker_factory(
        listeners="PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        listener_security_protocol_map="PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        listener_name_ssl_ssl_keystore_type="PEM",
        listener_name_ssl_ssl_keystore_location=files["a"],
    )
    port = broker.ports["SSL"]
    create_topic(broker.bootstrap, "rotated", 1)
    assert _server_certificate(port) == der["a"]
    trust_a = ssl.create_default_context(cafile=None)
    trust_a.load_verify_locations(cadata=ca_a.cert_pem.bytes().decode())
    old = trust_a.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="localhost")
    try:
        assert _api_versions_over(old, 1)

        # Kafka's docs: a listener's keystore is updated per broker with the listener prefix
        assert alter(broker.bootstrap, "1", (key, SET, files["b"])) == (errors.NONE, None)
        wait_until(lambda: _server_certificate(port) == der["b"], 15, message="new connections see certificate B")
        assert _api_versions_over(old, 2)  # the connection made with certificate A keeps working

        # a client that trusts only B's CA produces over the listener
        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "security.protocol": "SSL",
                "ssl.ca.location": files["ca-b"],
                "ssl.endpoint.identification.algorithm": "https",
            }
        )
        delivered: list[object] = []
        producer.produce("rotated", b"v", on_delivery=lambda e, m: delivered.append(e))
        assert producer.flush(30) == 0 and delivered == [None], delivered

        # a keystore that does not load, or that changes the certificate's subject, is refused; nothing changes
        code, message = alter(broker.bootstrap, "1", (key, SET, str(tmp_path / "missing.pem")))
        assert code == errors.INVALID_REQUEST
        assert message.startswith(
            "Invalid value org.apache.kafka.common.config.ConfigException: Validation of dynamic config update "
            "of SSLFactory failed: Failed to load the SSL keystore of listener SSL"
        ), message
        code, message = alter(broker.bootstrap, "1", (key, SET, files["other-dn"]))
        assert code == errors.INVALID_REQUEST and "Keystore DistinguishedName does not match" in message, message
        with BrokerConnection.to(broker.bootstrap, client_id="t") as conn:
            described = conn.request(
                ApiKeys.DESCRIBE_CONFIGS,
                4,
                {
                    "resources": [{"resource_type": 4, "resource_name": "1", "configuration_keys": [key]}],
                    "include_synonyms": True,
                    "include_documentation": False,
                },
            )
        [entry] = described["results"][0]["configs"]
        assert [(s["source"], s["value"]) for s in entry["synonyms"]] == [(2, files["b"]), (4, files["a"])]
        assert _server_certificate(port) == der["b"] and _api_versions_over(old, 3)
    finally:
        old.close()
