"""queued.max.request.bytes: SimpleMemoryPool, and Processors that stop reading while it is exhausted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykbroker.config.config_def import ConfigException
from pykbroker.config.kafka_config import KafkaConfig
from pykbroker.network.memory_pool import NONE, SimpleMemoryPool
from tests.helpers.wait import wait_until
from tests.unit.network.harness import EchoServer, read_frame, request_frame


def test_non_strict_pool_grants_while_any_memory_is_left():
    pool = SimpleMemoryPool(1000, 1000)
    assert pool.try_allocate(900)
    assert pool.try_allocate(900)  # 100 bytes left: non-strict grants and goes negative
    assert pool.available_memory == -800 and pool.is_out_of_memory
    assert not pool.try_allocate(1)
    pool.release(900)
    assert pool.available_memory == 100 and not pool.is_out_of_memory
    assert pool.used_memory == 900


def test_strict_pool_grants_only_what_fits():
    pool = SimpleMemoryPool(1000, 1000, strict=True)
    assert pool.try_allocate(600)
    assert not pool.try_allocate(600)
    assert pool.available_memory == 400


def test_pool_rejects_impossible_sizes():
    with pytest.raises(ValueError):
        SimpleMemoryPool(0, 10)
    with pytest.raises(ValueError):
        SimpleMemoryPool(100, 10).try_allocate(11)
    assert NONE.try_allocate(10**12) and not NONE.is_out_of_memory


@given(st.lists(st.integers(1, 500), max_size=50))
def test_pool_accounting_returns_to_full(sizes):
    pool = SimpleMemoryPool(2000, 500)
    granted = [s for s in sizes if pool.try_allocate(s)]
    assert pool.used_memory == sum(granted)
    for s in granted:
        pool.release(s)
    assert pool.available_memory == 2000


def test_queued_max_request_bytes_must_cover_one_request():
    base = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "socket.request.max.bytes": "1000",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    }
    with pytest.raises(ConfigException, match="queued.max.request.bytes"):
        KafkaConfig(dict(base, **{"queued.max.request.bytes": "999"}))
    assert KafkaConfig(dict(base, **{"queued.max.request.bytes": "1000"}))["queued.max.request.bytes"] == 1000


def gauge(server, name: str) -> float:
    return server.metrics.get(f"kafka.network:type=SocketServer,name={name}").value


def test_processor_stops_reading_while_the_pool_is_exhausted_and_resumes_after_release():
    overrides = {"socket.request.max.bytes": "1000", "queued.max.request.bytes": "1000"}
    with EchoServer(**overrides) as server:
        server.handler.gate.clear()  # requests stay queued (and their bytes held) until the gate opens
        queue = server.socket_server.data_plane_request_channel.request_queue
        clients = [server.connect() for _ in range(3)]
        frames = [request_frame(i, b"x" * 880) for i in range(3)]
        clients[0].sendall(frames[0])
        clients[1].sendall(frames[1])
        # The handler holds the first request; the second waits in the queue. 2 x 890 bytes are taken
        # from a pool of 1000 (the non-strict pool grants the second while 110 bytes are left).
        wait_until(lambda: gauge(server, "MemoryPoolUsed") == 2 * 890, timeout=5, message="two requests held")
        clients[2].sendall(frames[2])
        wait_until(lambda: server.processor.selector.out_of_memory, timeout=5, message="third channel muted for memory")
        assert server.processor.selector.channels  # nothing was closed
        assert queue.qsize() == 1  # the third frame was not read
        server.handler.gate.set()
        for sock, frame in zip(clients, frames, strict=True):
            assert read_frame(sock) == frame[4:]
        wait_until(lambda: gauge(server, "MemoryPoolUsed") == 0, timeout=5, message="all memory released")
        assert not server.processor.selector.out_of_memory
        for sock in clients:
            sock.close()


def test_memory_of_a_half_read_frame_is_released_when_the_client_goes():
    with EchoServer(**{"socket.request.max.bytes": "1000", "queued.max.request.bytes": "1000"}) as server:
        sock = server.connect()
        frame = request_frame(1, b"y" * 500)
        sock.sendall(frame[:300])
        wait_until(
            lambda: gauge(server, "MemoryPoolUsed") == len(frame) - 4, timeout=5, message="frame memory allocated"
        )
        sock.close()
        wait_until(lambda: gauge(server, "MemoryPoolUsed") == 0, timeout=5, message="memory released on close")
        assert gauge(server, "MemoryPoolAvailable") == 1000
