"""Client timeouts driven by MockTime (Kafka's NetworkClientTest with MockTime): request.timeout.ms,
the reconnect back-off and poll's timeout expire when the clock is advanced, without waiting."""

from __future__ import annotations

import socket
import time as wall

import pytest

from pykbroker.clients.consumer import KafkaConsumer
from pykbroker.clients.metadata import ClusterMetadata
from pykbroker.clients.network_client import CHECKING_API_VERSIONS, NetworkClient, RequestTimeoutError
from pykbroker.utils.time import MockTime

NODE = 0


@pytest.fixture
def silent_broker():
    """A listening socket that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[socket.socket] = []
    yield server, accepted
    for s in accepted:
        s.close()
    server.close()


def _poll_until(client: NetworkClient, condition, what: str) -> None:
    deadline = wall.monotonic() + 10  # real sockets: a bound on the wait, not a sleep
    while not condition():
        assert wall.monotonic() < deadline, f"timed out waiting for {what}"
        client.poll(0.05)


def _connected_client(silent_broker, mock: MockTime, **kw) -> NetworkClient:
    server, accepted = silent_broker
    client = NetworkClient("test", time=mock, **kw)
    client.set_address(NODE, server.getsockname())
    assert not client.is_ready(NODE, client.now())  # starts connecting
    _poll_until(client, lambda: client.in_flight_count(NODE) == 1, "the ApiVersions request")
    accepted.append(server.accept()[0])
    assert client.conns[NODE].state == CHECKING_API_VERSIONS
    return client


def test_request_timeout_expires_on_mock_time(silent_broker):
    mock = MockTime()
    client = _connected_client(silent_broker, mock, request_timeout_ms=30000, reconnect_backoff_ms=50)
    try:
        errors: list[BaseException] = []
        client.conns[NODE].in_flight[0].callback = lambda response, error: errors.append(error)
        mock.sleep(30000)
        client.poll(0)
        assert errors == [] and client.in_flight_count(NODE) == 1  # exactly the timeout: not expired yet
        mock.sleep(1)
        client.poll(0)
        assert len(errors) == 1 and isinstance(errors[0], RequestTimeoutError)
        assert "due to request timeout" in str(errors[0])
        assert NODE not in client.conns
        # reconnect.backoff.ms, on the same clock
        assert client.connection_delay(NODE, client.now()) == pytest.approx(0.05)
        assert not client.is_ready(NODE, client.now())
        assert NODE not in client.conns  # still backing off: no new connection
        mock.sleep(49)
        assert client.connection_delay(NODE, client.now()) == pytest.approx(0.001)
        client.is_ready(NODE, client.now())
        assert NODE not in client.conns
        mock.sleep(2)
        assert client.connection_delay(NODE, client.now()) == 0
        client.is_ready(NODE, client.now())
        assert NODE in client.conns  # connecting again
    finally:
        client.close_all()


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_reconnect_backoff_doubles_up_to_max_on_mock_time():
    mock = MockTime()
    client = NetworkClient("test", reconnect_backoff_ms=50, reconnect_backoff_max_ms=150, time=mock)
    client.set_address(NODE, ("127.0.0.1", _unused_port()))  # connection refused
    try:
        delays = []
        for _ in range(4):
            assert client.connection_delay(NODE, client.now()) == 0, delays
            client.is_ready(NODE, client.now())
            _poll_until(client, lambda: NODE not in client.conns, "the refused connection")
            delay = client.connection_delay(NODE, client.now())
            delays.append(round(delay, 3))
            client.is_ready(NODE, client.now())
            assert NODE not in client.conns  # backing off
            mock.sleep(delay * 1000 + 1)
        assert delays == [0.05, 0.1, 0.15, 0.15]
    finally:
        client.close_all()


def test_metadata_max_age_on_mock_time():
    mock = MockTime()
    metadata = ClusterMetadata(["127.0.0.1:9092"], metadata_max_age_ms=300000, time=mock)
    metadata.update({"brokers": [], "topics": []}, mock.nanoseconds() / 1e9)
    now = lambda: mock.nanoseconds() / 1e9  # noqa: E731
    assert not metadata.update_due(now())
    mock.sleep(299999)
    assert not metadata.update_due(now())
    mock.sleep(1)
    assert metadata.update_due(now())


def test_consumer_poll_timeout_elapses_on_mock_time():
    mock = MockTime()
    consumer = KafkaConsumer({"bootstrap.servers": "127.0.0.1:9"}, time=mock)
    start_ns = mock.nanoseconds()
    started = wall.monotonic()
    assert consumer.poll(timeout_ms=600000) == []  # nothing assigned: waits out the timeout
    assert mock.nanoseconds() - start_ns >= 600000 * 1_000_000
    assert wall.monotonic() - started < 5  # ten minutes passed on the mock clock only
    consumer.close()
