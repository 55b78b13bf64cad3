"""The ReplicaFetcherThread reading the leader's answers into one reused buffer (issue 31): the fetcher's
connection is a real :class:`~pykbroker.clients.broker_connection.BrokerConnection` to a TCP leader that decodes
each request and answers with the fake leader's handlers over the wire, so the records appended are views of the
connection's buffer as in a broker."""

from __future__ import annotations

import socket
import struct
import threading
from pathlib import Path

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import decode_request, encode_response, parse_request_header
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.client_security import PLAINTEXT
from pykbroker.server.replica_fetcher_thread import FETCHING
from tests.unit.server.test_replica_fetcher_thread import TOPIC, FakeLeader, Harness, batches


class WireLeader:
    """A TCP listener on 127.0.0.1 that answers each request frame with ``leader.handlers[api_key](body)``."""

    def __init__(self, leader: FakeLeader):
        self.leader = leader
        self.server = socket.create_server(("127.0.0.1", 0))
        self.connections: list[BrokerConnection] = []
        self._peers: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def connect(self, host, port, *, client_id, timeout, security, on_socket, reuse_receive_buffer=False):
        conn = BrokerConnection(
            "127.0.0.1",
            self.server.getsockname()[1],
            client_id=client_id,
            timeout=timeout,
            security=security or PLAINTEXT,
            on_socket=on_socket,
            **({"reuse_receive_buffer": True} if reuse_receive_buffer else {}),
        )
        self.connections.append(conn)
        return conn

    def _serve(self) -> None:
        try:
            peer, _ = self.server.accept()
        except OSError:
            return
        self._peers.append(peer)
        with peer:
            while True:
                size = _read(peer, 4)
                if size is None:
                    return
                request = _read(peer, struct.unpack(">i", size)[0])
                if request is None:
                    return
                header, at = parse_request_header(request)
                body = decode_request(header.api_key, header.api_version, memoryview(request)[at:])
                self.leader.requests.append((header.api_key, header.api_version, body))
                answer = self.leader.handlers[header.api_key](body)
                peer.sendall(encode_response(header.api_key, header.api_version, header.correlation_id, answer))

    def close(self) -> None:
        self.server.close()
        for peer in self._peers:
            try:
                peer.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _read(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def test_consecutive_answers_with_different_records_are_both_appended_from_one_reused_buffer(tmp_path):
    """Two Fetch answers of the same size whose records differ: the second is read into the buffer the first was
    read into (no fresh buffer per answer), after the first's records were appended (the log append copies them):
    the follower's log holds both answers' batches byte for byte."""
    h = Harness(tmp_path)
    wire = WireLeader(h.leader)
    h.fetcher._connection_factory = wire.connect
    first, second = batches(0, [2, 3]), batches(5, [2, 3])
    assert len(first) == len(second) and first != second
    by_offset = {0: first, 5: second}

    def handle(body: dict) -> dict:
        topics = []
        for t in body["topics"]:
            ps = [
                {
                    "partition_index": p["partition"],
                    "high_watermark": 0,
                    "log_start_offset": 0,
                    "records": by_offset.get(p["fetch_offset"]),
                }
                for p in t["partitions"]
            ]
            topics.append({"topic_id": t["topic_id"], "partitions": ps})
        return {"error_code": 0, "session_id": 0, "responses": topics}

    h.leader.handlers[ApiKeys.FETCH] = handle
    buffers: list[object] = []  # the objects each answer was read into (strong references: ids are not reused)
    appended: list[bytes] = []
    partition = h.partition()
    append = partition.append_records_as_follower

    def recording_append(records, *args):
        with memoryview(records) as view:
            buffers.append(view.obj)
        appended.append(bytes(records))
        return append(records, *args)

    partition.append_records_as_follower = recording_append  # type: ignore[method-assign]
    try:
        h.add(state=FETCHING)
        h.fetcher.do_work()
        h.fetcher.do_work()
        assert appended == [first, second]
        assert partition.log.log_end_offset == 10
        [segment] = sorted(Path(tmp_path, f"{TOPIC}-0").glob("*.log"))
        assert segment.read_bytes()[: 2 * len(first)] == first + second
        assert buffers[0] is buffers[1]  # one buffer for both answers (before: a new one per answer)
    finally:
        h.close()
        wire.close()
