"""KSelector and KafkaChannel reads over a socketpair: edge-triggered readiness, frames read past the
previous one, mute/unmute without epoll changes, the wakeup flag; and the bounded request queue."""

from __future__ import annotations

import os
import queue
import socket
import struct
import threading
import time

import pytest

from pykbroker.network.channel import KafkaChannel, NetworkSend, TruncatedReceiveError
from pykbroker.network.request_channel import BoundedRequestQueue
from pykbroker.network.selector import KSelector


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class CountingEpoll:
    """Wraps the selector's epoll object and counts register/modify/unregister calls."""

    def __init__(self, epoll):
        self.epoll = epoll
        self.ctl = 0

    def register(self, *a):
        self.ctl += 1
        return self.epoll.register(*a)

    def modify(self, *a):
        self.ctl += 1
        return self.epoll.modify(*a)

    def unregister(self, *a):
        self.ctl += 1
        return self.epoll.unregister(*a)

    def poll(self, *a):
        return self.epoll.poll(*a)

    def close(self):
        self.epoll.close()


@pytest.fixture
def pair():
    server, client = socket.socketpair()
    server.setblocking(False)
    sel = KSelector(1 << 20, -1)
    sel.epoll = CountingEpoll(sel.epoll)
    sel.register("c", server)
    yield sel, client
    client.close()
    sel.close_all()


def poll_until_receive(sel: KSelector, channel_id: str = "c", polls: int = 50) -> bytes:
    for _ in range(polls):
        sel.poll(100)
        receive = sel.completed_receives.pop(channel_id, None)
        if receive is not None:
            return bytes(receive.payload)
    raise AssertionError("no receive")


def test_pipelined_frames_in_one_segment_are_read_one_per_poll_and_none_is_lost_while_muted(pair):
    sel, client = pair
    client.sendall(frame(b"one") + frame(b"two") + frame(b"three"))
    assert poll_until_receive(sel) == b"one"
    sel.mute("c")
    ctl = sel.epoll.ctl
    sel.poll(0)
    assert "c" not in sel.completed_receives  # muted: the buffered frames wait
    sel.unmute("c")
    assert poll_until_receive(sel) == b"two"  # no new edge: the buffered bytes are read nonetheless
    assert poll_until_receive(sel) == b"three"
    assert sel.epoll.ctl == ctl  # mute and unmute changed no epoll state


def test_unmute_reads_bytes_that_arrived_while_muted(pair):
    sel, client = pair
    client.sendall(frame(b"a"))
    assert poll_until_receive(sel) == b"a"
    sel.mute("c")
    client.sendall(frame(b"b"))
    sel.poll(100)  # the edge arrives while muted
    assert "c" not in sel.completed_receives
    sel.unmute("c")
    assert poll_until_receive(sel, polls=1) == b"b"


def test_large_frame_is_read_across_polls(pair):
    sel, client = pair
    payload = bytes(range(256)) * 1024  # 256 KiB: larger than the scratch buffer
    t = threading.Thread(target=client.sendall, args=(frame(payload),))
    t.start()
    assert poll_until_receive(sel, polls=200) == payload
    t.join()


def test_truncated_frame_then_close_is_reported(pair):
    sel, client = pair
    errors = []
    sel.on_close_error = lambda cid, exc: errors.append(exc)
    client.sendall(struct.pack(">i", 100) + b"x" * 10)
    client.shutdown(socket.SHUT_WR)
    for _ in range(20):
        sel.poll(100)
        if sel.disconnected:
            break
    assert "c" in sel.disconnected
    assert isinstance(errors[0], TruncatedReceiveError)


def test_close_while_muted_is_seen_after_unmute(pair):
    sel, client = pair
    client.sendall(frame(b"a"))
    assert poll_until_receive(sel) == b"a"
    sel.mute("c")
    client.close()
    sel.poll(100)
    assert not sel.disconnected  # muted: nothing is read, the close waits
    sel.unmute("c")
    sel.poll(100)
    assert "c" in sel.disconnected


def test_channel_read_keeps_bytes_past_the_frame():
    a, b = socket.socketpair()
    a.setblocking(False)
    channel = KafkaChannel("x", a, 1 << 20)
    b.sendall(frame(b"first") + frame(b"sec"))
    scratch = bytearray(1024)
    first = channel.read(scratch)
    assert bytes(first.payload) == b"first"
    assert bytes(channel.buffered) == frame(b"sec")
    second = channel.read(scratch)
    assert bytes(second.payload) == b"sec"
    assert channel.buffered is None
    assert channel.read(scratch) is None and not channel.read_ready  # drained: wait for the next edge
    channel.close()
    b.close()


def test_wakeup_writes_only_while_the_owner_may_block():
    sel = KSelector(1 << 20, -1)
    try:
        sel.prepare_to_block()
        sel.poll(0)  # the poll returned: the owner is working and checks its queues before blocking again
        sel.wakeup()
        with pytest.raises(BlockingIOError):
            os.eventfd_read(sel._wakeup_fd)  # nothing written
        sel.prepare_to_block()
        sel.wakeup()  # the owner may block: written once
        sel.wakeup()
        assert os.eventfd_read(sel._wakeup_fd) == 1
        sel.wakeup(force=True)
        assert os.eventfd_read(sel._wakeup_fd) == 1
    finally:
        sel.close_all()


def test_bounded_request_queue_blocks_a_put_while_full_and_keeps_fifo_order():
    q = BoundedRequestQueue(2)
    q.put(1)
    q.put(2)
    assert q.full() and q.qsize() == 2
    put_done = threading.Event()
    t = threading.Thread(target=lambda: (q.put(3), put_done.set()))
    t.start()
    assert not put_done.wait(0.3)  # full: the put waits (back-pressure)
    assert q.get(1) == 1
    assert put_done.wait(5)
    t.join()
    assert [q.get(1), q.get(1)] == [2, 3]
    with pytest.raises(queue.Empty):
        q.get(0.01)
    with pytest.raises(queue.Empty):
        q.get_nowait()


class RecordingProcessor:
    id = 0

    def __init__(self):
        self.calls = []

    def enqueue_response(self, response, wakeup=True):
        self.calls.append(("enqueue", wakeup))

    def wakeup(self):
        self.calls.append(("wakeup",))


def test_responses_sent_by_a_handler_wake_their_processor_once_the_handler_is_done():
    from pykbroker.network.request_channel import RequestChannel, SendResponse

    channel = RequestChannel(10)
    processor = RecordingProcessor()
    channel.add_processor(processor)

    def response():
        request = type("R", (), {"processor": 0, "api_local_complete_time_ns": -1})()
        return SendResponse(request, None)

    channel.send_response(response())  # not on a handler: queued and woken at once
    assert processor.calls == [("enqueue", True)]
    processor.calls.clear()
    channel.defer_wakeups()
    channel.send_response(response())
    channel.send_response(response())
    assert processor.calls == [("enqueue", False), ("enqueue", False)]
    channel.flush_wakeups()
    assert processor.calls[2:] == [("wakeup",)]
    channel.send_response(response())  # deferral ended with the flush
    assert processor.calls[3:] == [("enqueue", True)]


def _park(q: BoundedRequestQueue, n: int, got: list, lock: threading.Lock) -> list[threading.Thread]:
    """Start ``n`` getters one after another, each parked before the next starts (parking order 0..n-1)."""

    def getter(i: int) -> None:
        item = q.get(10)
        with lock:
            got.append((i, item))

    threads = []
    for i in range(n):
        t = threading.Thread(target=getter, args=(i,), daemon=True)
        t.start()
        threads.append(t)
        deadline = time.monotonic() + 5
        while len(q._parked) < i + 1 and time.monotonic() < deadline:
            time.sleep(0.001)
    assert len(q._parked) == n
    return threads


def test_bounded_request_queue_wakes_one_parked_getter_per_item_most_recent_first():
    q = BoundedRequestQueue(10)
    got: list = []
    threads = _park(q, 3, got, threading.Lock())
    q.put("a")
    threads[2].join(5)
    assert got == [(2, "a")]  # the most recently parked getter, and only it:
    assert len(q._parked) == 2  # queue.SimpleQueue wakes a second waiter here, for nothing
    q.put("b")
    threads[1].join(5)
    q.put("c")
    threads[0].join(5)
    assert got == [(2, "a"), (1, "b"), (0, "c")] and not q._parked and not q._waking


def test_bounded_request_queue_hands_a_backlog_on_from_getter_to_getter():
    q = BoundedRequestQueue(10)
    got: list = []
    threads = _park(q, 3, got, threading.Lock())
    q.put("a")  # wakes getter 2; it needs the GIL, which this thread keeps until it blocks:
    q.put("b")  # so "b" is queued while a wake-up is in flight and wakes nobody; getter 2 passes it on
    deadline = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert sorted(item for _, item in got) == ["a", "b"]
    assert len(q._parked) == 1  # two items woke two getters; the third was left parked
    q.put("c")
    for t in threads:
        t.join(5)
    assert sorted(item for _, item in got) == ["a", "b", "c"] and not q._waking


def test_bounded_request_queue_times_out_and_loses_nothing_under_concurrent_puts():
    q = BoundedRequestQueue(8)
    started = time.monotonic()
    with pytest.raises(queue.Empty):
        q.get(0.05)
    assert time.monotonic() - started >= 0.04 and not q._parked  # a timed-out getter unparks itself
    n_items, received = 4000, []
    lock = threading.Lock()
    done = threading.Event()

    def consumer() -> None:
        while not done.is_set():
            try:
                item = q.get(0.001)  # short timeouts race the puts' wake-ups
            except queue.Empty:
                continue
            with lock:
                received.append(item)
                if len(received) == n_items:
                    done.set()

    def producer(start: int) -> None:
        for i in range(start, start + n_items // 2):
            q.put(i)

    consumers = [threading.Thread(target=consumer, daemon=True) for _ in range(4)]
    producers = [threading.Thread(target=producer, args=(s,), daemon=True) for s in (0, n_items // 2)]
    for t in consumers + producers:
        t.start()
    assert done.wait(30)
    for t in consumers + producers:
        t.join(5)
    assert sorted(received) == list(range(n_items))
    assert not q._waking and q.empty()


def test_channel_read_and_write_time_is_summed_for_the_request_quota(pair):
    """The network thread time of a channel (Kafka's KafkaChannel network thread time): what reads and writes
    took, summed until the Processor hands it to the request whose response completed (and resets it)."""
    sel, client = pair
    channel = sel.channel("c")
    assert channel.thread_time_ns == 0
    client.sendall(frame(b"ping"))
    assert poll_until_receive(sel) == b"ping"
    after_read = channel.thread_time_ns
    assert after_read > 0
    sel.send(NetworkSend("c", [frame(b"pong")]))
    assert channel.thread_time_ns > after_read
