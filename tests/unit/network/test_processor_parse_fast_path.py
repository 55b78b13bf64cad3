"""The Processor's one-step parse of a usual request (issue 31): once an (api key, version) has been parsed by the
general path (``Processor._parse_request``) on a Processor, its next requests are parsed in one step by
``_process_completed_receives`` and their channels muted inline. Both paths must give the same Request (header,
context, body, name, size) and the same mute states (REQUEST_RECEIVED, RESPONSE_SENT, throttling); what the fast
path does not take (header tagged fields, a bad client id length) goes through the general path, which judges it."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from pykbroker.network.channel import ChannelMuteState
from pykbroker.protocol import encode_request
from pykbroker.protocol.api_keys import ApiKeys
from tests.helpers.wait import wait_until

from .harness import EchoHandler, EchoServer, read_frame

RECORDS = b"\x00" * 61 + b"records"  # opaque to the parse (a zero-copy slice of the frame)


def produce_frame(version: int, correlation_id: int, client_id: bytes | None, header_tags: bytes = b"") -> bytes:
    """A framed ProduceRequest at ``version`` (header v1 below 9, v2 from 9) whose client id is ``client_id`` as
    raw bytes (None: null); ``header_tags``: a header v2's tagged field section instead of the empty one."""
    body_frame = encode_request(
        ApiKeys.PRODUCE,
        version,
        correlation_id,
        "",
        {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": RECORDS}]}],
        },
    )
    flexible = version >= 9
    body = body_frame[4 + 10 + (1 if flexible else 0) :]  # after the size, header v1 fields (empty client id), tags
    length = -1 if client_id is None else len(client_id)
    header = struct.pack(">hhih", ApiKeys.PRODUCE, version, correlation_id, length) + (client_id or b"")
    if flexible:
        header += header_tags or b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


class RecordingHandler(EchoHandler):
    """Records what the handler sees of each request (before its buffer is released), then echoes it."""

    def __init__(self, channel):
        super().__init__(channel)
        self.seen: list[dict] = []
        self.on_request = None  # f(request), called on the handler thread before the answer

    def answer(self, request) -> bytes:
        body = request.body
        records = body["topic_data"][0]["partition_data"][0]["records"] if body else None
        self.seen.append(
            {
                "context": request.context,
                "body": {**body, "topic_data": None} if body else body,
                "records": bytes(records) if records is not None else None,
                "api_name": request.api_name,
                "size": request.size,
                "unsupported": request.unsupported_version,
                "processor": request.processor,
                "memory_release": request.memory_release,
                "buffer": bytes(request.buffer),
                "start_time_ns": request.start_time_ns,
                "request": request,
            }
        )
        if self.on_request is not None:
            self.on_request(request)
        return super().answer(request)


def recording_server() -> tuple[EchoServer, RecordingHandler]:
    server = EchoServer()
    server.handler = RecordingHandler(server.socket_server.data_plane_request_channel)
    return server, server.handler


def count_general_parses(processor) -> list[int]:
    calls = [0]
    general = processor._parse_request

    def parse(*args):
        calls[0] += 1
        return general(*args)

    processor._parse_request = parse
    return calls


def exchange(sock: socket.socket, frame: bytes) -> None:
    sock.sendall(frame)
    assert read_frame(sock) == frame[4:]


@pytest.mark.parametrize("version", [3, 8, 9, 11])
@pytest.mark.parametrize("client_id", [b"producer-1", b"", None, b"\xff\xfe-not-utf8"])
def test_the_one_step_parse_gives_the_general_paths_request(version, client_id):
    server, handler = recording_server()
    with server:
        calls = count_general_parses(server.processor)
        sock = server.connect()
        try:
            frame = produce_frame(version, 7, client_id)
            exchange(sock, frame)  # first of its (api key, version): the general path
            assert calls[0] == 1
            exchange(sock, frame)  # then the one-step parse
            exchange(sock, frame)
            assert calls[0] == 1
        finally:
            sock.close()
    general, fast, again = handler.seen
    for seen in (fast, again):
        for key in ("context", "body", "records", "api_name", "size", "unsupported", "processor", "buffer"):
            assert seen[key] == general[key], key
        assert seen["memory_release"] is None and general["memory_release"] is None  # the unbounded pool's
        assert seen["start_time_ns"] > general["start_time_ns"]
    header = fast["context"].header
    assert (header.api_key, header.api_version, header.correlation_id) == (ApiKeys.PRODUCE, version, 7)
    assert header.header_version == (2 if version >= 9 else 1)
    assert header.client_id == ("" if client_id is None else client_id.decode("utf-8", "replace"))
    assert fast["records"] == RECORDS and fast["api_name"] == "Produce" and fast["size"] == len(frame)


def test_header_tagged_fields_go_through_the_general_path():
    server, handler = recording_server()
    with server:
        calls = count_general_parses(server.processor)
        sock = server.connect()
        try:
            exchange(sock, produce_frame(9, 1, b"p"))
            # one tagged field (tag 0, 2 bytes) in the header: not the usual header, parsed as before
            exchange(sock, produce_frame(9, 2, b"p", header_tags=b"\x01\x00\x02ab"))
            assert calls[0] == 2
            exchange(sock, produce_frame(9, 3, b"p"))
            assert calls[0] == 2
        finally:
            sock.close()
    assert [seen["context"].header.correlation_id for seen in handler.seen] == [1, 2, 3]
    assert handler.seen[1]["context"].header.client_id == "p"
    assert handler.seen[1]["body"] == handler.seen[0]["body"]
    assert handler.seen[1]["records"] == RECORDS


@pytest.mark.parametrize("bad_length", [-2, 200])
def test_a_bad_client_id_length_of_a_known_api_closes_the_connection(bad_length):
    """The one-step parse leaves a client id length below -1 or past the frame to the general path, which refuses
    it (ProtocolDecodeError: the connection is closed, as for any unparsable request); other connections go on."""
    server, handler = recording_server()
    with server:
        calls = count_general_parses(server.processor)
        sock, other = server.connect(), server.connect()
        try:
            exchange(sock, produce_frame(3, 1, b"p"))  # the general path: first of its kind
            exchange(other, produce_frame(3, 0, b"p"))  # the general path: first on its connection (address)
            assert calls[0] == 2
            payload = bytearray(produce_frame(3, 2, b"p")[4:])
            payload[8:10] = struct.pack(">h", bad_length)
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            with pytest.raises(ConnectionError):
                read_frame(sock)
            assert calls[0] == 3
            exchange(other, produce_frame(3, 3, b"p"))
            assert calls[0] == 3
        finally:
            sock.close()
            other.close()
    assert [seen["context"].header.correlation_id for seen in handler.seen] == [1, 0, 3]


def test_mute_states_of_the_one_step_path_and_of_a_throttled_response():
    """Fast path: muted when parsed (MUTED_AND_RESPONSE_PENDING, explicitly muted), unmuted once the response is
    written. A throttle started before the response (KIP-219) still keeps the channel muted after it is written
    (MUTED_AND_THROTTLED: the state machine's path) until the throttle ends; the next request is read only then."""
    server, handler = recording_server()
    with server:
        processor = server.processor
        selector = processor.selector
        request_channel = processor.request_channel
        states: list = []
        sock = server.connect()
        try:
            exchange(sock, produce_frame(9, 1, b"p"))  # the general path (first of its kind)
            (connection_id,) = selector.channels
            channel = selector.channels[connection_id]

            def observe(request):
                states.append((channel.mute_state, connection_id in selector.explicitly_muted))

            handler.on_request = observe
            exchange(sock, produce_frame(9, 2, b"p"))
            wait_until(lambda: channel.mute_state is ChannelMuteState.NOT_MUTED)
            assert connection_id not in selector.explicitly_muted
            assert states == [(ChannelMuteState.MUTED_AND_RESPONSE_PENDING, True)]

            handler.on_request = request_channel.start_throttling  # queued before the response, as Kafka does
            exchange(sock, produce_frame(9, 3, b"p"))
            wait_until(lambda: channel.mute_state is ChannelMuteState.MUTED_AND_THROTTLED)
            assert connection_id in selector.explicitly_muted
            handler.on_request = None
            sock.sendall(produce_frame(9, 4, b"p"))
            throttled = handler.seen[-1]["request"]
            ended_ns = time.monotonic_ns()
            request_channel.end_throttling(throttled)
            assert read_frame(sock) == produce_frame(9, 4, b"p")[4:]
            wait_until(lambda: channel.mute_state is ChannelMuteState.NOT_MUTED)
        finally:
            sock.close()
    assert [seen["context"].header.correlation_id for seen in handler.seen] == [1, 2, 3, 4]
    assert handler.seen[3]["start_time_ns"] >= ended_ns  # read only once the throttle ended
