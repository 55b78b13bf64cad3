"""The Processor's loop enters a stage only when it has work (issue 31: a lone request costs two passes of the
loop, the one that reads it and the one that writes its response, so a stage run on every pass for nothing is
paid twice per request), and its selector is woken through an eventfd it never has to read."""

from __future__ import annotations

import collections
import os
import socket
import struct
import sys

import pytest

from pykbroker.network.channel import InvalidReceiveError, KafkaChannel
from pykbroker.network.memory_pool import NONE, SimpleMemoryPool
from pykbroker.network.selector import KSelector

from .harness import EchoServer, read_frame
from .harness import echo as harness_echo
from .test_processor_parse_fast_path import produce_frame

REQUESTS = 40


def _count_processor_calls(server: EchoServer, requests: int, frame_for=None) -> collections.Counter:
    """Python functions (and builtins) the Processor thread called, by name, while ``requests`` lock-step echoes
    ran on one connection (of ``frame_for(correlation id)``'s frames; ApiVersions v0 by default). The profile
    hook is installed and removed on the Processor thread itself, by its selector's ``send`` (which it calls for
    each response)."""
    processor = server.processor
    counts: collections.Counter = collections.Counter()
    hook = {"install": False, "remove": False}

    def profile(frame, event, arg):
        if event == "call":
            counts[frame.f_code.co_name] += 1
        elif event == "c_call":
            counts[getattr(arg, "__name__", "?")] += 1

    original_send = processor.selector.send

    def send(network_send):
        if hook["install"]:
            hook["install"] = False
            sys.setprofile(profile)
        elif hook["remove"]:
            hook["remove"] = False
            sys.setprofile(None)
        original_send(network_send)

    processor.selector.send = send
    sock = server.connect()

    def echo(sock, correlation_id):
        if frame_for is None:
            return harness_echo(sock, correlation_id)
        frame = frame_for(correlation_id)
        sock.sendall(frame)
        assert read_frame(sock) == frame[4:]

    try:
        echo(sock, 0)  # connection registered, first request served: steady state from here
        hook["install"] = True
        echo(sock, 1)  # the Processor installs the hook while it answers this one
        counts.clear()
        for i in range(requests):
            echo(sock, 2 + i)
        result = collections.Counter(counts)
        hook["remove"] = True
        echo(sock, 99)
    finally:
        sock.close()
        processor.selector.send = original_send
    return result


def test_a_lone_request_enters_each_stage_of_the_loop_once():
    with EchoServer() as server:
        counts = _count_processor_calls(server, REQUESTS)
    # one receive pass and one response pass per request: the receive stage runs on the first, the response
    # stage on the second, and neither on the other (lock-step: never two requests or responses in one pass)
    assert counts["_process_completed_receives"] <= REQUESTS + 1, counts
    assert counts["_process_new_responses"] <= REQUESTS + 1, counts
    assert counts["_parse_request"] >= REQUESTS, counts
    # no connection over max.connections: the excess check never calls out
    assert counts["_close_excess_connections"] == 0, counts
    assert counts["max_connections_exceeded"] == 0, counts
    # the wakeup eventfd is not read
    assert counts["eventfd_read"] == 0, counts
    # the whole Processor side of an (ApiVersions v0) echo, both passes, parse and metrics included: 151
    # calls before issue 31's cuts, 113 after its first round, 95 after its second (this profile's send
    # wrapper included)
    assert sum(counts.values()) / REQUESTS <= 100, counts


def test_a_usual_request_is_parsed_in_one_step_and_its_mute_transitions_are_inline():
    """Issue 31, second round: a Produce request of an (api key, version) seen before is parsed without the general
    path's steps, its channel muted and unmuted without the mute state machine's calls, its response written
    without KafkaChannel's steps, and the loop's poll is inline."""
    with EchoServer() as server:
        counts = _count_processor_calls(server, REQUESTS, lambda correlation_id: produce_frame(9, correlation_id, b"p"))
    general_steps = (
        "_parse_request",
        "peek_api_key_version",
        "parse_request_header",
        "request_header_version",
        "api_name",
        "as_byte_view",
        "_api_allowed",
    )
    mute_steps = ("mute", "unmute", "maybe_unmute", "handle_mute_event")
    loop_steps = ("_poll", "prepare_to_block", "_hand_over_requests", "_select", "clear_completed_sends")
    write_steps = ("set_send", "write", "read")
    for name in general_steps + mute_steps + loop_steps + write_steps:
        assert counts[name] == 0, (name, counts)
    assert counts["decode_produce_request"] == REQUESTS, counts
    # the whole Processor side of a Produce v9 echo (both passes, parse, decode and metrics): 112
    # calls before issue 31's second round, 80 after
    assert sum(counts.values()) / REQUESTS <= 85, counts


def test_wakeups_interrupt_polls_without_the_eventfd_being_read():
    """Each wakeup of a blocking owner raises a new edge on the (edge-triggered) eventfd, which the selector
    never reads: the counter holds every write."""
    sel = KSelector(1 << 20, -1)
    try:
        for _ in range(3):
            sel.prepare_to_block()
            sel.wakeup()  # the owner may block: written
            sel.poll(10_000)  # returns at once (the new edge), not after 10 s
            assert sel.select_time_ns < 5_000_000_000
        assert os.eventfd_read(sel._wakeup_fd) == 3  # all three writes still counted: none was read
    finally:
        sel.close_all()


def test_a_frame_from_the_unbounded_pool_is_neither_allocated_nor_released():
    """The unbounded pool (Kafka's MemoryPool.NONE, every listener's unless queued.max.request.bytes is set)
    grants everything and counts nothing: a frame read through it owes it nothing (no call to allocate, none to
    release); a bounded pool's frame is still allocated and given back."""
    for pool, owes in ((NONE, False), (SimpleMemoryPool(1 << 20, 1 << 20), True)):
        server, client = socket.socketpair()
        server.setblocking(False)
        sel = KSelector(1 << 20, -1, memory_pool=pool)
        try:
            sel.register("c", server)
            client.sendall(struct.pack(">i", 5) + b"hello")
            for _ in range(50):
                sel.poll(100)
                if sel.completed_receives:
                    break
            receive = sel.completed_receives["c"]
            assert bytes(receive.payload) == b"hello"
            assert receive.allocated is owes
            assert pool.used_memory == (5 if owes else 0)
            receive.release()
            assert pool.used_memory == 0
        finally:
            client.close()
            sel.close_all()


def test_whole_frames_are_taken_from_one_recv_and_a_partial_one_is_completed_by_the_next():
    """KafkaChannel.read's fast path: frames whole in the first recv (and in what it read past them) are taken on
    the spot; a partial frame left over is finished by the general path once its bytes arrive; a size above the
    limit is refused (InvalidReceiveError) whichever path sees it."""
    server, client = socket.socketpair()
    server.setblocking(False)
    scratch = bytearray(1 << 16)
    channel = KafkaChannel("c", server, 1 << 10)
    try:
        third = frame(b"third")
        client.sendall(frame(b"first") + frame(b"") + third[:6])
        assert bytes(channel.read(scratch).payload) == b"first"
        assert bytes(channel.read(scratch).payload) == b""  # from what the first recv read past "first"
        assert channel.read(scratch) is None and channel.receive is not None  # 2 of third's 5 bytes so far
        client.sendall(third[6:])
        channel.read_ready = True  # (the poller's edge)
        assert bytes(channel.read(scratch).payload) == b"third"
        client.sendall(struct.pack(">i", (1 << 10) + 1) + b"x")
        channel.read_ready = True
        with pytest.raises(InvalidReceiveError):
            channel.read(scratch)
    finally:
        client.close()
        channel.close()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload
