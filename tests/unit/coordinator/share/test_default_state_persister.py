"""DefaultStatePersister against a scripted broker on a local socket (Kafka's PersisterStateManagerTest cases): it
finds the share coordinator with FindCoordinator (key type SHARE, ``group:topicId:partition``), sends the state RPC
there, retries COORDINATOR_LOAD_IN_PROGRESS at the same coordinator and NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE
after looking it up again, gives up with the last error once its timeout passed, passes any other error through at
once, completes futures on its own thread, and refuses calls after stop."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

import pytest

from pykbroker.coordinator.share.default_state_persister import DefaultStatePersister
from pykbroker.coordinator.share.persister import ACKNOWLEDGED, PersisterStateBatch, ReadStateResult
from pykbroker.coordinator.share.share_coordinator_records import coordinator_key
from pykbroker.protocol import decode_request, encode_response, errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.header import parse_request_header

T = uuid.UUID(int=7)
SUPPORTED = {
    ApiKeys.API_VERSIONS: (0, 3),
    ApiKeys.FIND_COORDINATOR: (0, 6),
    **{k: (0, 0) for k in range(83, 88)},
}


class ScriptedBroker:
    """Answers ApiVersions itself and every other request with ``script(api_key, body) -> response body``;
    ``requests`` records ``(api_key, version, body)``."""

    def __init__(self, script):
        self.script = script
        self.requests: list[tuple[int, int, dict]] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                size_bytes = self._read(conn, 4)
                if size_bytes is None:
                    return
                frame = self._read(conn, struct.unpack(">i", size_bytes)[0])
                if frame is None:
                    return
                header, offset = parse_request_header(frame)
                key, version = header.api_key, header.api_version
                body = decode_request(key, version, memoryview(frame)[offset:])
                if key == ApiKeys.API_VERSIONS:
                    keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in SUPPORTED.items()]
                    response = {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0}
                else:
                    self.requests.append((key, version, body))
                    response = self.script(key, body)
                conn.sendall(encode_response(key, version, header.correlation_id, response))

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def close(self) -> None:
        self.server.close()

    def keys(self) -> list[int]:
        return [k for k, _, _ in self.requests]


def _found(port: int, code: int = errors.NONE, key: str = "") -> dict:
    return {
        "throttle_time_ms": 0,
        "coordinators": [
            {"key": key, "node_id": 1, "host": "127.0.0.1", "port": port, "error_code": code, "error_message": None}
        ],
    }


def _read_answer(code: int, batches=()) -> dict:
    p = {"partition": 0, "error_code": code, "error_message": None, "state_epoch": -1, "start_offset": -1}
    if code == errors.NONE:
        p.update(state_epoch=2, start_offset=10, state_batches=[dict(b._asdict()) for b in batches])
    else:
        p["state_batches"] = []
    return {"results": [{"topic_id": T, "partitions": [p]}]}


@pytest.fixture
def broker_and_persister():
    made = []

    def make(script, timeout_ms=10_000):
        broker = ScriptedBroker(script)
        persister = DefaultStatePersister(
            0, lambda: [(1, "127.0.0.1", broker.port)], timeout_ms=timeout_ms, retry_backoff_ms=10
        )
        made.append((broker, persister))
        return broker, persister

    yield make
    for broker, persister in made:
        persister.stop()
        broker.close()


def test_retries_load_in_progress_and_not_coordinator_then_answers(broker_and_persister):
    batch = PersisterStateBatch(10, 12, ACKNOWLEDGED, 1)
    reads = iter([errors.COORDINATOR_LOAD_IN_PROGRESS, errors.NOT_COORDINATOR, errors.NONE])
    port = []

    def script(key, body):
        if key == ApiKeys.FIND_COORDINATOR:
            assert (body["key_type"], body["coordinator_keys"]) == (2, [coordinator_key("g", T, 0)])
            return _found(port[0], key=body["coordinator_keys"][0])
        assert key == ApiKeys.READ_SHARE_GROUP_STATE
        assert body["group_id"] == "g" and body["topics"][0]["partitions"][0]["leader_epoch"] == 3
        return _read_answer(next(reads), [batch])

    broker, persister = broker_and_persister(script)
    port.append(broker.port)
    threads = []
    future = persister.read_state("g", T, 0, 3)
    future.add_done_callback(lambda f: threads.append(threading.current_thread().name))
    assert future.result(10) == ReadStateResult(errors.NONE, 2, 10, (batch,))
    F, R = ApiKeys.FIND_COORDINATOR, ApiKeys.READ_SHARE_GROUP_STATE
    # LOAD_IN_PROGRESS: the same coordinator again; NOT_COORDINATOR: looked up again
    assert broker.keys() == [F, R, R, F, R]
    assert threads == ["PersisterStateManager-0"]
    assert [v for k, v, _ in broker.requests if k == F] == [6, 6]


def test_gives_up_with_the_last_error_after_its_timeout(broker_and_persister):
    broker, persister = broker_and_persister(
        lambda key, body: _found(0, errors.COORDINATOR_NOT_AVAILABLE), timeout_ms=400
    )
    start = time.monotonic()
    future = persister.write_state("g", T, 0, 0, 0, 0, ())
    assert future.result(10) == errors.COORDINATOR_NOT_AVAILABLE
    assert 0.3 <= time.monotonic() - start < 5
    assert len(broker.requests) >= 3 and set(broker.keys()) == {ApiKeys.FIND_COORDINATOR}


def test_other_errors_pass_through_at_once(broker_and_persister):
    port = []

    def script(key, body):
        if key == ApiKeys.FIND_COORDINATOR:
            return _found(port[0])
        return {"results": [{"topic_id": T, "partitions": [{"partition": 0, "error_code": errors.FENCED_STATE_EPOCH}]}]}

    broker, persister = broker_and_persister(script)
    port.append(broker.port)
    assert persister.initialize_state("g", T, 0, 1, 0).result(10) == errors.FENCED_STATE_EPOCH
    assert persister.delete_state("g", T, 0).result(10) == errors.FENCED_STATE_EPOCH
    # the coordinator is remembered: one lookup for both calls
    assert broker.keys().count(ApiKeys.FIND_COORDINATOR) == 1


def test_calls_after_stop_fail_their_futures(broker_and_persister):
    _, persister = broker_and_persister(lambda key, body: _found(0, errors.COORDINATOR_NOT_AVAILABLE))
    persister.stop()
    with pytest.raises(RuntimeError):
        persister.read_summary("g", T, 0, 0).result(5)
