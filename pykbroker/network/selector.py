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

Threading: owned by one Processor thread; only ``wakeup`` may be called from other threads.
A testable subclass can override ``register``/``send``/``_select`` to inject faults (see
tests/unit/network/test_processor_faults.py, after Kafka's SocketServerTest.TestableSelector).
"""

from __future__ import annotations

import os
import selectors
import socket
from collections import OrderedDict

from pykbroker.network.channel import InvalidReceiveError, KafkaChannel, NetworkReceive, NetworkSend
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
