"""KSelector: the non-blocking multi-connection I/O loop of one Processor.

Mirrors ``org.apache.kafka.common.network.Selector`` (server side), over ``selectors.EpollSelector``:

* ``register(id, sock)`` / ``close(id)`` / ``send(NetworkSend)`` / ``mute(id)`` / ``unmute(id)``;
* ``poll(timeout_ms)`` fills ``completed_receives`` (ordered ``{id: NetworkReceive}``, at most one per
  channel per poll), ``completed_sends`` and ``disconnected`` (``{id: reason}``); the owner clears each
  after handling it (``send`` writes optimistically, so sends can also complete between polls);
* idle expiry: at most one connection idle for ``connections.max.idle.ms`` is closed per poll;
* ``wakeup()`` (thread-safe) interrupts a blocking poll through an eventfd;
* memory pressure: a channel whose next frame the ``memory_pool`` cannot hold mutes itself; once the
  pool has memory again, the next poll unmutes every channel not explicitly muted (Kafka's
  ``outOfMemory`` handling).

Interest set: READ unless muted, WRITE while a send is pending. A channel with no interest is
unregistered from epoll (``selectors`` cannot hold an empty interest set) and re-registered on demand.

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
import selectors
import socket
from collections import OrderedDict, deque

from pykbroker.network.channel import UNLIMITED, InvalidReceiveError, KafkaChannel, NetworkReceive, NetworkSend
from pykbroker.network.memory_pool import NONE as _UNBOUNDED_POOL
from pykbroker.network.memory_pool import MemoryPool
from pykbroker.utils.time import SYSTEM, Time

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE

# Close reasons reported in ``disconnected`` (Kafka's ChannelState)
EXPIRED = "EXPIRED"
FAILED_SEND = "FAILED_SEND"
LOCAL_CLOSE = "LOCAL_CLOSE"
READY = "READY"  # remote close / error after the channel was ready
NOT_CONNECTED = "NOT_CONNECTED"  # a client connection that could not be established


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
        self.selector = selectors.EpollSelector()
        self.channels: dict[str, KafkaChannel] = {}
        self.explicitly_muted: set[str] = set()
        self.completed_receives: dict[str, NetworkReceive] = {}
        self.completed_sends: list[NetworkSend] = []
        self.disconnected: dict[str, str] = {}
        self.close_reasons: dict[str, str] = {}
        self.failed_sends: list[str] = []
        self.on_close_error = on_close_error  # callable(id, exc) for logging
        self.idle_ns = connections_max_idle_ms * 1_000_000 if connections_max_idle_ms >= 0 else -1
        self.lru: OrderedDict[str, int] = OrderedDict()
        self.next_idle_check_ns = 0
        self.select_time_ns = 0  # accumulated time blocked in select (NetworkProcessorAvgIdlePercent)
        self._wakeup_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.selector.register(self._wakeup_fd, READ, None)

    # -- registration --------------------------------------------------------------------------
    def register(self, channel_id: str, sock: socket.socket) -> KafkaChannel:
        if channel_id in self.channels:
            raise ValueError(f"There is already a connection for id {channel_id}")
        channel = KafkaChannel(channel_id, sock, self.max_receive_size, self.memory_pool)
        self.channels[channel_id] = channel
        self._set_interest(channel, READ)
        if self.idle_ns >= 0:
            self.lru[channel_id] = self.time.nanoseconds()
        return channel

    def _set_interest(self, channel: KafkaChannel, events: int) -> None:
        if events == channel.registered_events:
            return
        if channel.registered_events == 0:
            self.selector.register(channel.fileno, events, channel)
        elif events == 0:
            self.selector.unregister(channel.fileno)
        else:
            self.selector.modify(channel.fileno, events, channel)
        channel.registered_events = events

    def _update_interest(self, channel: KafkaChannel) -> None:
        events = (0 if channel.is_muted else READ) | (WRITE if channel.send is not None else 0)
        self._set_interest(channel, events)

    # -- operations ----------------------------------------------------------------------------
    def send(self, send: NetworkSend) -> None:
        channel = self.channels.get(send.destination)
        if channel is None:
            self.failed_sends.append(send.destination)
            return
        channel.set_send(send)
        # Optimistic write: most responses fit in the socket buffer, saving an epoll round trip.
        try:
            done = channel.write()
        except OSError as e:
            self._close_channel(channel, FAILED_SEND, e)
            return
        if done is not None:
            self.completed_sends.append(done)
        else:
            self._update_interest(channel)

    def mute(self, channel_id: str) -> None:
        channel = self.channels.get(channel_id)
        if channel is not None:
            channel.mute()
            self.explicitly_muted.add(channel_id)
            self._update_interest(channel)

    def unmute(self, channel_id: str) -> bool:
        """Unmute if the channel's state allows (see KafkaChannel.maybe_unmute)."""
        channel = self.channels.get(channel_id)
        if channel is None:
            return False
        if channel.maybe_unmute():
            self.explicitly_muted.discard(channel_id)
            self._update_interest(channel)
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
        if channel.registered_events:
            try:
                self.selector.unregister(channel.fileno)
            except (KeyError, ValueError):
                pass
            channel.registered_events = 0
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

    def wakeup(self) -> None:
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
        return self.selector.select(timeout_s)

    def poll(self, timeout_ms: int) -> None:
        if timeout_ms < 0:
            raise ValueError("timeout should be >= 0")
        # Results are cleared by the Processor once it has handled them (clear_completed_*), not here:
        # ``send`` writes optimistically, so a send may complete (or fail) between two polls.
        for channel_id in self.failed_sends:
            self.disconnected[channel_id] = FAILED_SEND
        self.failed_sends = []
        if self.out_of_memory and not self.memory_pool.is_out_of_memory:
            self._unmute_after_memory_pressure()

        start = self.time.nanoseconds()
        ready = self._select(timeout_ms / 1000.0)
        end = self.time.nanoseconds()
        self.select_time_ns += end - start

        lru = self.lru if self.idle_ns >= 0 else None
        for key, events in ready:
            channel: KafkaChannel | None = key.data
            if channel is None:
                try:
                    os.eventfd_read(self._wakeup_fd)
                except OSError:
                    pass
                continue
            if channel.id not in self.channels:
                continue
            if lru is not None:
                lru[channel.id] = end
                lru.move_to_end(channel.id)
            try:
                if events & READ and not channel.is_muted and channel.id not in self.completed_receives:
                    receive = channel.read()
                    if receive is not None:
                        self.completed_receives[channel.id] = receive
                    elif channel.is_muted:  # it muted itself: the memory pool is out of memory
                        self.out_of_memory = True
                        self._update_interest(channel)
                if events & WRITE and channel.send is not None:
                    send = channel.write()
                    if send is not None:
                        self.completed_sends.append(send)
                        self._update_interest(channel)
            except (EOFError, InvalidReceiveError, OSError) as e:
                self._close_channel(channel, READY, None if type(e) is EOFError else e)
        if lru is not None:
            self._maybe_close_oldest_connection(end)

    def _unmute_after_memory_pressure(self) -> None:
        for channel_id, channel in self.channels.items():
            if channel_id not in self.explicitly_muted and channel.maybe_unmute():
                self._update_interest(channel)
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
        try:
            self.selector.close()
        finally:
            os.close(self._wakeup_fd)


class ClientSelector(KSelector):
    """KSelector for a client's I/O thread (Kafka's ``Selector`` as used by ``NetworkClient``).

    * ``connect(id, address, send_buffer_size, receive_buffer_size)`` opens a non-blocking connection;
      once established the next ``poll`` lists its id in ``connected``, and a failure closes it with
      reason ``NOT_CONNECTED`` in ``disconnected`` (the error goes to ``on_close_error``);
    * ``send`` on a connection still writing an earlier send queues it; ``poll`` starts it once the
      earlier one is written (requests go out in order);
    * receives have no size limit but the int32 prefix, and there is no idle expiry.
    The owner clears ``connected`` (``clear_connected``) after handling it, as the other results.
    """

    def __init__(self, time: Time = SYSTEM, on_close_error=None, max_receive_size: int = UNLIMITED):
        super().__init__(max_receive_size, -1, time, on_close_error)
        self.connecting: set[str] = set()
        self.connected: list[str] = []
        self.queued_sends: dict[str, deque[NetworkSend]] = {}

    def connect(
        self, channel_id: str, address: tuple[str, int], send_buffer_size: int, receive_buffer_size: int
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
        if not self.connecting:
            return ready
        rest = []
        for key, events in ready:
            channel = key.data
            if channel is not None and channel.id in self.connecting:
                self._finish_connect(channel)
            else:
                rest.append((key, events))
        return rest

    def _finish_connect(self, channel: KafkaChannel) -> None:
        self.connecting.discard(channel.id)
        err = channel.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self._close_channel(channel, NOT_CONNECTED, OSError(err, os.strerror(err)))
            return
        self._update_interest(channel)
        self.connected.append(channel.id)

    def _drop(self, channel: KafkaChannel) -> None:
        self.connecting.discard(channel.id)
        self.queued_sends.pop(channel.id, None)
        super()._drop(channel)
