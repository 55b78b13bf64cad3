"""KSelector: the non-blocking multi-connection I/O loop of one Processor.

Mirrors ``org.apache.kafka.common.network.Selector`` (server side), over ``select.epoll``:

* ``register(id, sock)`` / ``close(id)`` / ``send(NetworkSend)`` / ``mute(id)`` / ``unmute(id)``;
* ``poll(timeout_ms)`` fills ``completed_receives`` (ordered ``{id: NetworkReceive}``, at most one per
  channel per poll), ``completed_sends`` and ``disconnected`` (``{id: reason}``); the owner clears each
  after handling it (``send`` writes optimistically, so sends can also complete between polls);
* idle expiry: at most one connection idle for ``connections.max.idle.ms`` is closed per poll;
* ``wakeup()`` (thread-safe) interrupts a blocking poll through an eventfd. The eventfd is written only
  when the owner may be blocked in ``epoll_wait``: the owner calls ``prepare_to_block()`` *before* its
  last check for pending work (response queue, new connections), so a waker that finds the flag clear
  knows the owner will still see its work before blocking (one eventfd write per wait, not per
  response). The eventfd is registered edge-triggered and never read: every write raises a new edge
  (the kernel wakes its pollers on each write), so a wake-up costs the poller no ``read``;
* memory pressure: a channel whose next frame the ``memory_pool`` cannot hold mutes itself; once the
  pool has memory again, the next poll unmutes every channel not explicitly muted (Kafka's
  ``outOfMemory`` handling).

Readiness: a channel is registered once, edge-triggered for READ (``EPOLLIN | EPOLLET``), plus
WRITE (one ``epoll_ctl(MOD)`` each way) only while a send is pending, and stays registered until it
closes. An edge marks the channel ``read_ready`` and puts it in ``ready_reads``; it is read when not
muted, and leaves ``ready_reads`` once a read comes back short (the socket is drained: the next
arrival raises a new edge) and no bytes read past a frame are ``buffered``. So ``mute``/``unmute``
(Kafka flips the READ interest op, which NIO applies in user space) cost no system call: a muted
channel's edge is just remembered, and a poll does not block while an unmuted channel is ready
(Kafka's ``keysWithBufferedRead``). Reads go through a scratch buffer owned by this selector: a small
request is one ``recv`` (see ``KafkaChannel.read``).

:class:`ClientSelector` is the client-side mode (the Selector under Kafka's ``NetworkClient``): it adds
``connect`` (non-blocking, completed in ``poll`` and reported in ``connected``) and queues a send
behind the one a connection is still writing, so a client can pipeline requests.

Threading: owned by one Processor thread; only ``wakeup`` may be called from other threads.
A testable subclass can override ``register``/``send``/``_select`` to inject faults (see
tests/unit/network/test_processor_faults.py, after Kafka's SocketServerTest.TestableSelector).
"""

from __future__ import annotations

import errno
import os
import select
import socket
from collections import OrderedDict, deque
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any, cast

from pykbroker.network.channel import (
    UNLIMITED,
    ChannelMuteState,
    InvalidReceiveError,
    KafkaChannel,
    NetworkReceive,
    NetworkSend,
)
from pykbroker.network.memory_pool import NONE as _UNBOUNDED_POOL
from pykbroker.network.memory_pool import MemoryPool
from pykbroker.network.ssl_transport import SslTransportLayer
from pykbroker.utils.time import SYSTEM, Time

READ = select.EPOLLIN
WRITE = select.EPOLLOUT
_READ_INTEREST = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET
_READ_EVENTS = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR  # data, EOF or error
_CLOSED_EVENTS = select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR
_WRITE_EVENTS = select.EPOLLOUT | select.EPOLLHUP | select.EPOLLERR
#: Bytes asked of the socket when a frame starts (one recv for a whole small request).
SCRATCH_BYTES = 64 * 1024

# Close reasons reported in ``disconnected`` (Kafka's ChannelState)
EXPIRED = "EXPIRED"
FAILED_SEND = "FAILED_SEND"
LOCAL_CLOSE = "LOCAL_CLOSE"
READY = "READY"  # remote close / error after the channel was ready
NOT_CONNECTED = "NOT_CONNECTED"  # a client connection that could not be established
AUTHENTICATION_FAILED = "AUTHENTICATION_FAILED"  # a client connection whose TLS handshake failed

_NOT_MUTED = ChannelMuteState.NOT_MUTED


class KSelector:
    def __init__(
        self,
        max_receive_size: int,
        connections_max_idle_ms: int,
        time: Time = SYSTEM,
        on_close_error=None,
        memory_pool: MemoryPool = _UNBOUNDED_POOL,
    ):
        self.max_receive_size = max_receive_size
        self.memory_pool = memory_pool
        self.out_of_memory = False
        self.time = time
        self.epoll = select.epoll()
        self.channels: dict[str, KafkaChannel] = {}
        self.fd_channels: dict[int, KafkaChannel] = {}  # registered file descriptor -> channel
        self.ready_reads: dict[str, KafkaChannel] = {}  # channels that may have bytes to read (see above)
        self._scratch = bytearray(SCRATCH_BYTES)
        self.explicitly_muted: set[str] = set()
        self.completed_receives: dict[str, NetworkReceive] = {}
        self.completed_sends: list[NetworkSend] = []
        self.disconnected: dict[str, str] = {}
        self.failed_sends: list[str] = []
        self.on_close_error = on_close_error  # callable(id, exc) for logging
        self.idle_ns = connections_max_idle_ms * 1_000_000 if connections_max_idle_ms >= 0 else -1
        self.lru: OrderedDict[str, int] = OrderedDict()
        self.next_idle_check_ns = 0
        self.select_time_ns = 0  # accumulated time blocked in select (NetworkProcessorAvgIdlePercent)
        #: ``time.nanoseconds()`` read when the last poll's select returned (the owner's "now" after a poll)
        self.poll_end_ns = 0
        # Edge-triggered and never read (module docstring): the counter only grows, one per wake-up that
        # found the owner blocking (2**64 - 2 writes before a write would fail; not reachable)
        self._wakeup_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.epoll.register(self._wakeup_fd, READ | select.EPOLLET)
        # wakeup writes the eventfd while _may_block; once the owner has called prepare_to_block
        # (_lazy_wakeup) the flag is cleared whenever a poll returns, so wakeups during work are free.
        self._lazy_wakeup = False
        self._may_block = True
        #: what poll calls to wait: epoll's own poll, unless a subclass overrides ``_select`` (fault injection)
        self._wait: Callable[[float], list[tuple[int, int]]] = (
            self.epoll.poll if type(self)._select is KSelector._select else self._select
        )

    # -- registration --------------------------------------------------------------------------
    def register(self, channel_id: str, sock: socket.socket) -> KafkaChannel:
        if channel_id in self.channels:
            raise ValueError(f"There is already a connection for id {channel_id}")
        channel = KafkaChannel(channel_id, sock, self.max_receive_size, self.memory_pool)
        self.channels[channel_id] = channel
        self._set_interest(channel, _READ_INTEREST)
        self.ready_reads[channel_id] = channel
        if self.idle_ns >= 0:
            self.lru[channel_id] = self.time.nanoseconds()
        return channel

    def _set_interest(self, channel: KafkaChannel, events: int) -> None:
        """One epoll_ctl: ADD the first time, MOD when the interest changes."""
        if channel.fileno in self.fd_channels:
            if events != channel.registered_events:
                self.epoll.modify(channel.fileno, events)
                channel.registered_events = events
        else:
            self.epoll.register(channel.fileno, events)
            self.fd_channels[channel.fileno] = channel
            channel.registered_events = events

    def _unregister(self, channel: KafkaChannel) -> None:
        if self.fd_channels.get(channel.fileno) is channel:
            del self.fd_channels[channel.fileno]
            try:
                self.epoll.unregister(channel.fileno)
            except (OSError, ValueError):
                pass
        channel.registered_events = 0

    def _update_interest(self, channel: KafkaChannel) -> None:
        """READ (edge-triggered) always; WRITE while a send is pending. Muting changes nothing here."""
        self._set_interest(channel, _READ_INTEREST | WRITE if channel.send is not None else _READ_INTEREST)

    # -- operations ----------------------------------------------------------------------------
    def send(self, send: NetworkSend) -> None:
        channel = self.channels.get(send.destination)
        if channel is None:
            self.failed_sends.append(send.destination)
            return
        if channel.send is not None:
            channel.set_send(send)  # raises: a send is still in progress
        channel.send = send  # (KafkaChannel.set_send and .write, inline)
        # Optimistic write: most responses fit in the socket buffer, saving an epoll round trip.
        start = perf_counter_ns()
        try:
            done = send.write_to(channel.sock)
            channel.thread_time_ns += perf_counter_ns() - start
        except OSError as e:
            self._close_channel(channel, FAILED_SEND, e)
            return
        if done:
            channel.send = None
            self.completed_sends.append(send)
        else:
            self._update_interest(channel)

    def mute(self, channel_id: str) -> None:
        channel = self.channels.get(channel_id)
        if channel is not None:
            channel.mute()
            self.explicitly_muted.add(channel_id)

    def unmute(self, channel_id: str) -> bool:
        """Unmute if the channel's state allows (see KafkaChannel.maybe_unmute)."""
        channel = self.channels.get(channel_id)
        if channel is None:
            return False
        if channel.maybe_unmute():
            self.explicitly_muted.discard(channel_id)
            return True
        return False

    def channel(self, channel_id: str) -> KafkaChannel | None:
        return self.channels.get(channel_id)

    def close(self, channel_id: str) -> None:
        """Local close (DISCARD_NO_NOTIFY): no ``disconnected`` entry is produced."""
        channel = self.channels.pop(channel_id, None)
        if channel is not None:
            self._drop(channel)

    def _drop(self, channel: KafkaChannel) -> None:
        self._unregister(channel)
        self.ready_reads.pop(channel.id, None)
        self.explicitly_muted.discard(channel.id)
        self.lru.pop(channel.id, None)
        receive = self.completed_receives.pop(channel.id, None)
        if receive is not None:
            receive.release()
        channel.close()

    def _close_channel(self, channel: KafkaChannel, reason: str, exc: BaseException | None = None) -> None:
        """Close with notification (GRACEFUL / NOTIFY_ONLY)."""
        if self.channels.pop(channel.id, None) is None:
            return
        if exc is not None and self.on_close_error is not None:
            self.on_close_error(channel.id, exc)
        self._drop(channel)
        self.disconnected[channel.id] = reason

    def prepare_to_block(self) -> None:
        """Owner thread, before its last check for work queued by other threads: from now until the
        next poll returns, ``wakeup`` writes the eventfd. An owner that never calls this gets one
        eventfd write per ``wakeup``."""
        self._lazy_wakeup = True
        self._may_block = True

    def wakeup(self, force: bool = False) -> None:
        """Interrupt a blocking poll (any thread). Writes the eventfd only if the owner may be blocked
        (see ``prepare_to_block``) or with ``force``."""
        if self._may_block or force:
            if self._lazy_wakeup:
                self._may_block = False  # one write is enough until the owner prepares to block again
            try:
                os.eventfd_write(self._wakeup_fd, 1)
            except OSError:
                pass

    def clear_completed_receives(self) -> None:
        self.completed_receives = {}

    def clear_completed_sends(self) -> None:
        self.completed_sends = []

    def clear_disconnected(self) -> None:
        self.disconnected = {}

    # -- poll ----------------------------------------------------------------------------------
    def _select(self, timeout_s: float):
        """``[(fd, events)]`` ready within ``timeout_s`` (epoll_wait)."""
        return self.epoll.poll(timeout_s)

    def poll(self, timeout_ms: float) -> None:
        if timeout_ms < 0:
            raise ValueError("timeout should be >= 0")
        # Results are cleared by the Processor once it has handled them (clear_completed_*), not here:
        # ``send`` writes optimistically, so a send may complete (or fail) between two polls.
        if self.failed_sends:
            for channel_id in self.failed_sends:
                self.disconnected[channel_id] = FAILED_SEND
            self.failed_sends = []
        if self.out_of_memory and not self.memory_pool.is_out_of_memory:
            self._unmute_after_memory_pressure()

        completed_receives = self.completed_receives
        if timeout_ms and self.ready_reads:
            for channel_id, ready_channel in self.ready_reads.items():
                if ready_channel.mute_state is _NOT_MUTED and channel_id not in completed_receives:
                    timeout_ms = 0  # bytes may be waiting on an unmuted channel: don't block
                    break
        nanoseconds = self.time.nanoseconds
        if timeout_ms:
            start = nanoseconds()
            try:
                ready = self._wait(timeout_ms / 1000.0)
            finally:
                if self._lazy_wakeup:
                    self._may_block = False
            end = nanoseconds()
            self.select_time_ns += end - start
        else:
            if self._lazy_wakeup:
                self._may_block = False
            ready = self._wait(0)
            end = nanoseconds()
        self.poll_end_ns = end

        lru = self.lru if self.idle_ns >= 0 else None
        fd_channels, channels, ready_reads = self.fd_channels, self.channels, self.ready_reads
        for fd, events in ready:
            channel = fd_channels.get(fd)
            if channel is None:  # the wakeup eventfd (edge-triggered, not read) or a channel closed meanwhile
                continue
            channel_id = channel.id
            if channel_id not in channels:
                continue
            if lru is not None:
                lru[channel_id] = end
                lru.move_to_end(channel_id)
            if events & _READ_EVENTS:  # an edge: data, EOF or an error to read (now or once unmuted)
                channel.read_ready = True
                ready_reads[channel_id] = channel
                if events & _CLOSED_EVENTS:  # a short read no longer means drained: EOF is still to be read
                    channel.peer_closed = True
            if events & _WRITE_EVENTS and channel.send is not None:
                try:
                    start = perf_counter_ns()
                    send = channel.write()
                    channel.thread_time_ns += perf_counter_ns() - start
                    if send is not None:
                        self.completed_sends.append(send)
                        self._update_interest(channel)
                except OSError as e:
                    self._close_channel(channel, READY, e)
        if ready_reads:
            self._read_ready_channels(end)
        if lru is not None and end >= self.next_idle_check_ns:
            self._maybe_close_oldest_connection(end)

    def _read_ready_channels(self, now_ns: int) -> None:
        """At most one completed receive per unmuted ready channel; drained channels leave ``ready_reads``.
        ``now_ns``: when the poll's select returned. A read's thread time runs from the previous clock read (that
        one, or the end of the previous read): one clock read per read."""
        completed_receives, ready_reads, scratch = self.completed_receives, self.ready_reads, self._scratch
        nanoseconds = self.time.nanoseconds
        drained = []
        start = now_ns
        for channel_id, channel in list(ready_reads.items()):
            if channel.mute_state is not _NOT_MUTED or channel_id in completed_receives:
                continue
            try:
                # a frame whole in one recv (or in ``buffered``) is taken by the channel's fast path, called
                # directly (KafkaChannel.read's first step); anything else is read's, as before
                receive = None
                if channel.receive is None and channel.memory_pool is _UNBOUNDED_POOL:
                    receive = channel.read_whole_frame(scratch)
                if receive is None:
                    receive = channel.read(scratch)
            except (EOFError, InvalidReceiveError, OSError) as e:
                self._close_channel(channel, READY, None if type(e) is EOFError else e)
                start = nanoseconds()
                continue
            end = nanoseconds()
            channel.thread_time_ns += end - start
            start = end
            if receive is not None:
                completed_receives[channel_id] = receive
            elif channel.mute_state is not _NOT_MUTED:  # it muted itself: the memory pool is out of memory
                self.out_of_memory = True
            if not channel.read_ready and channel.buffered is None:
                drained.append(channel_id)
        for channel_id in drained:
            del ready_reads[channel_id]

    def _unmute_after_memory_pressure(self) -> None:
        for channel_id, channel in self.channels.items():
            if channel_id not in self.explicitly_muted:
                channel.maybe_unmute()
        self.out_of_memory = False

    def _maybe_close_oldest_connection(self, now_ns: int) -> None:
        if not self.lru or now_ns < self.next_idle_check_ns:
            return
        oldest_id, last_active = next(iter(self.lru.items()))
        expire_at = last_active + self.idle_ns
        if now_ns >= expire_at:
            channel = self.channels.get(oldest_id)
            if channel is not None:
                self._close_channel(channel, EXPIRED)
            else:
                self.lru.pop(oldest_id, None)
            self.next_idle_check_ns = now_ns
        else:
            self.next_idle_check_ns = expire_at

    def lowest_priority_channel(self) -> KafkaChannel | None:
        """Least recently active channel, else any (for max.connections enforcement)."""
        for channel_id in self.lru:
            channel = self.channels.get(channel_id)
            if channel is not None:
                return channel
        return next(iter(self.channels.values()), None)

    def close_all(self) -> None:
        for channel in list(self.channels.values()):
            self.channels.pop(channel.id, None)
            self._drop(channel)
        self.fd_channels.clear()
        try:
            self.epoll.close()
        finally:
            os.close(self._wakeup_fd)


class ClientSelector(KSelector):
    """KSelector for a client's I/O thread (Kafka's ``Selector`` as used by ``NetworkClient``).

    * ``connect(id, address, send_buffer_size, receive_buffer_size)`` opens a non-blocking connection;
      once established the next ``poll`` lists its id in ``connected``, and a failure closes it with
      reason ``NOT_CONNECTED`` in ``disconnected`` (the error goes to ``on_close_error``);
    * ``send`` on a connection still writing an earlier send queues it; ``poll`` starts it once the
      earlier one is written (requests go out in order);
    * receives have no size limit but the int32 prefix, and there is no idle expiry;
    * with a ``transport_factory`` (TLS), the established socket is wrapped and its handshake is driven
      here, step by step on each readiness event; the id is listed in ``connected`` only once the handshake
      is complete, and a failed handshake closes it with reason ``AUTHENTICATION_FAILED``.
    The owner clears ``connected`` (``clear_connected``) after handling it, as the other results.
    """

    def __init__(self, time: Time = SYSTEM, on_close_error=None, max_receive_size: int = UNLIMITED):
        super().__init__(max_receive_size, -1, time, on_close_error)
        self.connecting: set[str] = set()
        self.handshaking: set[str] = set()
        # channel id -> its transport's factory (socket -> SslTransportLayer, which stands in for the socket)
        self.transport_factories: dict[str, Callable[[socket.socket], Any]] = {}
        self.connected: list[str] = []
        self.queued_sends: dict[str, deque[NetworkSend]] = {}

    def connect(
        self,
        channel_id: str,
        address: tuple[str, int],
        send_buffer_size: int,
        receive_buffer_size: int,
        transport_factory=None,
    ) -> None:
        """Start connecting. Raises OSError when the connection fails at once (e.g. unknown host)."""
        if channel_id in self.channels:
            raise ValueError(f"There is already a connection for id {channel_id}")
        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if send_buffer_size > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_size)
            if receive_buffer_size > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_size)
            err = sock.connect_ex(address)
            if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EINTR):
                raise OSError(err, os.strerror(err))
        except OSError:
            sock.close()
            raise
        channel = KafkaChannel(channel_id, sock, self.max_receive_size, self.memory_pool)
        self.channels[channel_id] = channel
        self.connecting.add(channel_id)
        if transport_factory is not None:
            self.transport_factories[channel_id] = transport_factory
        self._set_interest(channel, WRITE)  # writable = connected (or failed): see _finish_connect

    def clear_connected(self) -> None:
        self.connected = []

    def send(self, send: NetworkSend) -> None:
        channel = self.channels.get(send.destination)
        if channel is not None and (channel.send is not None or send.destination in self.queued_sends):
            self.queued_sends.setdefault(send.destination, deque()).append(send)
            return
        super().send(send)

    def poll(self, timeout_ms: float) -> None:
        super().poll(timeout_ms)
        if self.queued_sends:
            self._send_queued()

    def _send_queued(self) -> None:
        for channel_id, queue in list(self.queued_sends.items()):
            channel = self.channels.get(channel_id)
            while queue and channel is not None and channel.send is None:
                KSelector.send(self, queue.popleft())
                channel = self.channels.get(channel_id)
            if not queue or channel is None:
                self.queued_sends.pop(channel_id, None)

    def _select(self, timeout_s: float):
        ready = super()._select(timeout_s)
        if not self.connecting and not self.handshaking:
            return ready
        rest = []
        for fd, events in ready:
            channel = self.fd_channels.get(fd)
            if channel is not None and channel.id in self.connecting:
                self._finish_connect(channel)
            elif channel is not None and channel.id in self.handshaking:
                self._continue_handshake(channel)
            else:
                rest.append((fd, events))
        return rest

    def _finish_connect(self, channel: KafkaChannel) -> None:
        self.connecting.discard(channel.id)
        err = channel.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self._close_channel(channel, NOT_CONNECTED, OSError(err, os.strerror(err)))
            return
        factory = self.transport_factories.pop(channel.id, None)
        if factory is not None:
            try:
                channel.sock = factory(channel.sock)  # same file descriptor, now behind TLS
            except OSError as e:
                self._close_channel(channel, AUTHENTICATION_FAILED, e)
                return
            self.handshaking.add(channel.id)
            self._continue_handshake(channel)
            return
        self._connected(channel)

    def _continue_handshake(self, channel: KafkaChannel) -> None:
        try:
            wants = cast(SslTransportLayer, channel.sock).handshake()  # set by a transport factory
        except OSError as e:  # TlsHandshakeError included
            self._close_channel(channel, AUTHENTICATION_FAILED, e)
            return
        if wants is None:
            self.handshaking.discard(channel.id)
            self._connected(channel)
        else:  # an epoll MOD re-arms the edge: readiness that is already there is reported
            self._set_interest(channel, _READ_INTEREST | WRITE if wants == "write" else _READ_INTEREST)

    def _connected(self, channel: KafkaChannel) -> None:
        self._update_interest(channel)  # edge-triggered READ from now on (+ WRITE while a send is pending)
        channel.read_ready = True  # bytes may already be there: the first read finds out (as register does)
        self.ready_reads[channel.id] = channel
        self.connected.append(channel.id)

    def _drop(self, channel: KafkaChannel) -> None:
        self.connecting.discard(channel.id)
        self.handshaking.discard(channel.id)
        self.transport_factories.pop(channel.id, None)
        self.queued_sends.pop(channel.id, None)
        super()._drop(channel)
