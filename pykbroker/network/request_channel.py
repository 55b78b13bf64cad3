"""RequestChannel: the one hand-off between network threads and request handler threads.

Mirrors ``kafka.network.RequestChannel``:

* one bounded request queue per plane (``queued.max.requests``; 20 for the control plane) shared by
  all Processors of that plane; ``send_request`` is a **blocking** put: a full queue stalls the network
  thread, which is Kafka's back-pressure;
* one unbounded response queue per Processor (owned by the Processor; ``send_response`` routes by
  ``request.processor`` and wakes that Processor);
* response kinds :class:`SendResponse`, :class:`NoOpResponse`, :class:`CloseConnectionResponse`;
  :data:`SHUTDOWN_REQUEST` stops one handler thread;
* request metrics (RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs, ResponseQueueTimeMs,
  ResponseSendTimeMs, TotalTimeMs per API; ThrottleTimeMs: the quota throttle time answered) are recorded
  when the response is done, from the
  nanosecond timestamps the Request carries, exactly at Kafka's points; ErrorsPerSec (per API and error
  code, NONE included) when a response is sent, from the error counts its sender gives.

Thread-safe: queues are thread-safe; a Request's timestamps are written by one thread at a time as it
moves Processor -> handler -> (purgatory) -> Processor.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from time import monotonic
from typing import Any

from pykbroker.network.channel import NetworkSend
from pykbroker.protocol import errors
from pykbroker.utils.metrics import (
    GroupHistogram,
    GroupMeter,
    Histogram,
    HistogramGroup,
    Meter,
    MetricsRegistry,
    request_metric_name,
)
from pykbroker.utils.time import SYSTEM, Time


@dataclass(slots=True)
class RequestContext:
    """Who sent a request and how: header, connection id, client address, listener, protocol."""

    header: Any  # pykbroker.protocol.header.RequestHeader
    connection_id: str
    client_address: str
    client_port: int
    listener_name: str
    security_protocol: str
    client_software_name: str = "unknown"
    client_software_version: str = "unknown"
    #: the authenticated principal (``User:<name>`` from SASL or the client certificate; ANONYMOUS else)
    principal: str = "User:ANONYMOUS"
    #: the principal logged in with a delegation token (KIP-48; Kafka's ``KafkaPrincipal.tokenAuthenticated``)
    token_authenticated: bool = False

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str:
        return self.header.client_id


class Request:
    """A parsed request on its way through the broker. ``body`` is the decoded request dict (None for
    an ApiVersions request whose version is too new: it is answered as v0 with UNSUPPORTED_VERSION).
    ``buffer`` keeps the frame alive while the body references it (records are zero-copy slices)."""

    __slots__ = (
        "processor",
        "context",
        "body",
        "buffer",
        "start_time_ns",
        "request_dequeue_time_ns",
        "api_local_complete_time_ns",
        "response_complete_time_ns",
        "response_dequeue_time_ns",
        "api_name",
        "size",
        "unsupported_version",
        "memory_release",
        "pending_throttle",
        "api_throttle_time_ms",
        "record_network_thread_time",
        "envelope",
    )

    def __init__(
        self,
        processor: int,
        context: RequestContext,
        body: dict | None,
        buffer,
        start_time_ns: int,
        api_name: str,
        size: int,
        unsupported_version: bool = False,
        memory_release: Callable[[], None] | None = None,
    ):
        self.processor = processor
        self.context = context
        self.body = body
        self.buffer = buffer
        self.start_time_ns = start_time_ns
        self.request_dequeue_time_ns = -1
        self.api_local_complete_time_ns = -1
        self.response_complete_time_ns = -1
        self.response_dequeue_time_ns = -1
        self.api_name = api_name
        self.size = size
        self.unsupported_version = unsupported_version
        self.memory_release = memory_release  # gives the frame's bytes back to the memory pool
        #: the quota throttle a handler asked for, applied when the response is sent (server/quotas/request_throttle)
        self.pending_throttle: Any = None
        #: the quota throttle time answered to this request (ms; Kafka's ``apiThrottleTimeMs``), for ThrottleTimeMs
        self.api_throttle_time_ms = 0
        #: ``f(ns)`` records the network thread time of this request with its request quota, called by the
        #: Processor once the response is written (Kafka's ``recordNetworkThreadTimeCallback``); None: nothing
        self.record_network_thread_time: Callable[[int], None] | None = None
        #: the Envelope request this request was forwarded in (KIP-590; Kafka's ``Request.envelope``), else None
        self.envelope: Request | None = None

    @property
    def header(self):
        return self.context.header

    def release_buffer(self) -> None:
        """Drop the frame and return its bytes to the Processors' memory pool (``queued.max.request.bytes``);
        called by the request handler once the request is handled."""
        self.buffer = None
        release, self.memory_release = self.memory_release, None
        if release is not None:
            release()

    def __repr__(self) -> str:
        h = self.context.header
        return (
            f"Request(api={self.api_name}, version={h.api_version}, correlation_id={h.correlation_id}, "
            f"client_id={h.client_id!r}, connection={self.context.connection_id})"
        )


class _ShutdownRequest:
    def __repr__(self) -> str:
        return "ShutdownRequest"


SHUTDOWN_REQUEST = _ShutdownRequest()


class Response:
    __slots__ = ("request",)

    def __init__(self, request: Request):
        self.request = request


class SendResponse(Response):
    """Write ``send`` to the client; ``on_complete`` (optional) runs on the Processor after the write."""

    __slots__ = ("send", "on_complete")

    def __init__(self, request: Request, send: NetworkSend, on_complete: Callable[[], None] | None = None):
        self.request = request  # (Response.__init__'s one assignment, without the super() call)
        self.send = send
        self.on_complete = on_complete


class NoOpResponse(Response):
    """No bytes to write (acks=0 produce success): unmute and read the next request."""

    __slots__ = ()


class CloseConnectionResponse(Response):
    """Close the connection instead of answering (acks=0 produce error, unparseable error response)."""

    __slots__ = ()


class StartThrottlingResponse(Response):
    """The client is over a quota: keep its channel muted after its response is sent (KIP-219)."""

    __slots__ = ()


class EndThrottlingResponse(Response):
    """The throttle time is up: the channel may read again once its response is sent."""

    __slots__ = ()


_handler_thread = threading.local()  # deferred_wakeups: see RequestChannel.defer_wakeups


class _ApiMetrics:
    """The request metrics of one API name: its seven histograms (``REQUEST_METRICS`` order), their
    HistogramGroup (None if some of the names were registered before: then updated one by one), and its
    RequestsPerSec meters by request version: ``meters`` are counted by the group's records, ``marked`` are
    marked one by one. Written by the Processors; a dict assignment is atomic."""

    __slots__ = ("group", "histograms", "marked", "meters")

    def __init__(self, histograms: tuple[Histogram | None, ...], group: HistogramGroup | None) -> None:
        self.histograms = histograms
        self.group = group
        self.meters: dict[int, GroupMeter] = {}
        self.marked: dict[int, Meter] = {}


REQUEST_METRICS = (
    "RequestQueueTimeMs",
    "LocalTimeMs",
    "RemoteTimeMs",
    "ResponseQueueTimeMs",
    "ResponseSendTimeMs",
    "TotalTimeMs",
    "ThrottleTimeMs",  # not a phase: the request's quota throttle time (ms), 0 when not throttled
)


class BoundedRequestQueue:
    """The request queue: FIFO, at most ``maxsize`` items, ``put`` blocks while full (Kafka's
    ArrayBlockingQueue).

    Items live in a ``deque``. A handler that finds it empty *parks*: it pushes its own lock (one per
    thread, made once, held while the thread is not parked) on ``_parked`` and blocks acquiring it.
    Wake-ups are progressive and exact:

    * a put wakes the most recently parked handler (LIFO: the thread whose state is warmest), unless a
      woken handler has not yet come for its item (``_waking``): one wake-up in flight at a time;
    * the woken handler, having taken its item, wakes the next parked one if items are still queued
      (busy handlers take queued items themselves, without parking);
    * a get that finds an item makes no system call.

    ``queue.SimpleQueue`` (used before) shares one lock among all its waiters, so a woken getter that
    has taken its item releases the lock once more and wakes a second waiter whether or not anything is
    left for it: that one takes the GIL only to park again. Measured with ``bench/request_cost.py``
    (one connection, 2,500 produce requests/s): 10.7-10.9 context switches per request with it, 4.3 with
    this queue.

    The bound is kept by serialising puts under ``_put_lock``: a put waits on ``_not_full`` only while
    the queue is full, and a get signals it only when a put is waiting (``_put_waiters``, counted under
    the lock before the size is checked again, so a get that finds no waiter has already made room the
    waiting put will see)."""

    def __init__(self, maxsize: int):
        if maxsize <= 0:
            raise ValueError(f"queue size must be positive, got {maxsize}")
        self.maxsize = maxsize
        self._items: deque = deque()
        self._mutex = threading.Lock()  # guards _items' emptiness check against _parked and _waking
        self._parked: list = []  # the held locks of parked getters, most recent last
        self._waking = False  # a parked getter was released and has not yet looked at _items
        self._waiter = threading.local()
        self._put_lock = threading.Lock()
        self._not_full = threading.Condition(self._put_lock)
        self._put_waiters = 0

    def put(self, item) -> None:
        with self._put_lock:
            items = self._items
            while len(items) >= self.maxsize:
                self._put_waiters += 1
                try:
                    if len(items) >= self.maxsize:
                        self._not_full.wait(0.1)  # the timeout only bounds a missed notify; the loop re-checks
                finally:
                    self._put_waiters -= 1
            with self._mutex:
                items.append(item)
                waiter = None
                if self._parked and not self._waking:
                    waiter = self._parked.pop()
                    self._waking = True
        if waiter is not None:
            waiter.release()

    def _taken(self) -> None:
        if self._put_waiters:
            with self._put_lock:
                self._not_full.notify()

    def _own_waiter(self):
        waiter = getattr(self._waiter, "lock", None)
        if waiter is None:
            waiter = self._waiter.lock = threading.Lock()
            waiter.acquire()  # held while not parked: parking blocks acquiring it until a waker releases it
        return waiter

    def _take_locked(self):
        """Under ``_mutex``, with an item queued: pop it, and pick the next parked getter to wake (released
        by the caller once the mutex is dropped) if more items wait and no wake-up is in flight."""
        item = self._items.popleft()
        next_waiter = None
        if self._items and self._parked and not self._waking:
            next_waiter = self._parked.pop()
            self._waking = True
        return item, next_waiter

    def get(self, timeout: float | None = None, before_block: Callable[[], None] | None = None):
        """Raises queue.Empty after ``timeout`` seconds (None: wait forever). ``before_block`` (optional) is called
        once: right before this thread first blocks (its lock pushed on ``_parked`` already, so a put meanwhile is
        not missed), or right before returning an item taken without blocking."""
        deadline = None if timeout is None else monotonic() + timeout
        mutex, items, parked = self._mutex, self._items, self._parked
        woke = False
        while True:
            with mutex:
                if woke:  # this thread was the released one: the next put may wake another
                    self._waking = False
                    woke = False
                if items:
                    item, next_waiter = self._take_locked()
                    break
                waiter = self._own_waiter()
                parked.append(waiter)
            if before_block is not None:
                before_block()
                before_block = None
            if deadline is None:
                waiter.acquire()
                woke = True
                continue
            if waiter.acquire(timeout=max(0.0, deadline - monotonic())):
                woke = True
                continue
            with mutex:
                try:
                    parked.remove(waiter)
                except ValueError:  # a waker popped it and is releasing it: take that release below
                    pass
                else:
                    if not items:
                        raise queue.Empty
                    item, next_waiter = self._take_locked()
                    break
            waiter.acquire()
            woke = True
        if next_waiter is not None:
            next_waiter.release()
        if self._put_waiters:
            self._taken()
        if before_block is not None:
            before_block()
        return item

    def get_nowait(self):
        with self._mutex:
            if not self._items:
                raise queue.Empty
            item = self._items.popleft()
        if self._put_waiters:
            self._taken()
        return item

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return len(self._items) >= self.maxsize


class RequestChannel:
    def __init__(
        self, queue_size: int, metric_prefix: str = "", time: Time = SYSTEM, metrics: MetricsRegistry | None = None
    ):
        self.queue_size = queue_size
        self.metric_prefix = metric_prefix
        self.time = time
        self.metrics = metrics or MetricsRegistry()
        self.request_queue = BoundedRequestQueue(queue_size)
        self.processors: dict[int, Any] = {}
        #: ``(connection id) -> None`` called on the network thread when a client connection closes (Kafka's
        #: ``ConnectionDisconnectListener``, e.g. the share sessions opened over it end); must not block
        self.disconnect_listeners: list[Callable[[str], None]] = []
        self._request_metrics: dict[str, _ApiMetrics] = {}  # api name -> its histograms and RequestsPerSec meters
        self._errors_per_sec: dict[tuple[str, int], Meter] = {}  # (api name, error code) -> ErrorsPerSec meter
        self.metrics.gauge(
            f"kafka.network:type=RequestChannel,name={metric_prefix}RequestQueueSize", self.request_queue.qsize
        )

    # -- processors ----------------------------------------------------------------------------
    def add_processor(self, processor) -> None:
        if processor.id in self.processors:
            raise ValueError(f"processor with id {processor.id} already exists")
        self.processors[processor.id] = processor

    def remove_processor(self, processor_id: int) -> None:
        self.processors.pop(processor_id, None)

    def connection_closed(self, connection_id: str) -> None:
        """A processor closed ``connection_id`` or saw it disconnect: tell the disconnect listeners."""
        for listener in self.disconnect_listeners:
            listener(connection_id)

    # -- requests ------------------------------------------------------------------------------
    def send_request(self, request) -> None:
        """Blocking put (back-pressure onto the calling network thread)."""
        self.request_queue.put(request)

    def receive_request(self, timeout_ms: int, before_block: Callable[[], None] | None = None):
        """The next request, or None after ``timeout_ms``; ``before_block``: see BoundedRequestQueue.get (a
        handler passes :meth:`flush_wakeups`)."""
        try:
            return self.request_queue.get(timeout_ms / 1000.0, before_block)
        except queue.Empty:
            return None

    def send_shutdown_request(self) -> None:
        self.request_queue.put(SHUTDOWN_REQUEST)

    # -- responses -----------------------------------------------------------------------------
    def send_response(self, response: Response) -> None:
        request = response.request
        now = self.time.nanoseconds()
        request.response_complete_time_ns = now
        if request.api_local_complete_time_ns < 0:
            request.api_local_complete_time_ns = now
        processor = self.processors.get(request.processor)
        if processor is not None:  # a processor removed by resize: the response is dropped
            deferred = getattr(_handler_thread, "deferred_wakeups", None)
            if deferred is None:
                processor.enqueue_response(response)
            else:
                processor.enqueue_response(response, wakeup=False)
                deferred.add(processor)

    def defer_wakeups(self) -> None:
        """Request handler thread, before handling a request: responses sent on this thread until
        ``flush_wakeups`` are queued at once, but their Processors are woken only then. The handler
        flushes right before it blocks for the next request (``receive_request``'s ``before_block``, called
        once its lock is parked: the next thing this thread does is release the GIL), so a woken Processor
        finds the GIL free instead of waking only to wait for it while the handler finishes its bookkeeping."""
        _handler_thread.deferred_wakeups = set()

    def flush_wakeups(self) -> None:
        deferred = getattr(_handler_thread, "deferred_wakeups", None)
        _handler_thread.deferred_wakeups = None
        if deferred:
            for processor in deferred:
                processor.wakeup()

    def send_no_op_response(self, request: Request) -> None:
        self.send_response(NoOpResponse(request))

    def close_connection(self, request: Request) -> None:
        self.send_response(CloseConnectionResponse(request))

    def start_throttling(self, request: Request) -> None:
        """Kafka's ``RequestChannel.startThrottling``: queued before the request's response, so the Processor
        sees the channel throttled when the response is sent. Timings and metrics are left alone."""
        self._enqueue(StartThrottlingResponse(request))

    def end_throttling(self, request: Request) -> None:
        """Kafka's ``RequestChannel.endThrottling`` (called by a ThrottledChannelReaper thread)."""
        self._enqueue(EndThrottlingResponse(request))

    def _enqueue(self, response: Response) -> None:
        processor = self.processors.get(response.request.processor)
        if processor is not None:
            processor.enqueue_response(response)

    def clear(self) -> None:
        while True:
            try:
                self.request_queue.get_nowait()
            except queue.Empty:
                return

    # -- metrics -------------------------------------------------------------------------------
    def update_request_metrics(self, request: Request, end_ns: int) -> None:
        """Record the six timing histograms (ms as floats) and ``ThrottleTimeMs`` (the quota throttle time
        answered, as Kafka records for every request) under ``request=<ApiName>``, and mark its
        ``RequestsPerSec`` (``request=<ApiName>,version=<v>``); a follower's / consumer's Fetch also under
        ``request=FetchFollower`` / ``FetchConsumer``. Usually one HistogramGroup record (a list append) per
        API name: the per-API histograms and per-version meters are looked up by name once."""
        start = request.start_time_ns
        dequeue = request.request_dequeue_time_ns if request.request_dequeue_time_ns >= 0 else start
        local = request.api_local_complete_time_ns if request.api_local_complete_time_ns >= 0 else dequeue
        complete = request.response_complete_time_ns if request.response_complete_time_ns >= 0 else local
        rdequeue = request.response_dequeue_time_ns if request.response_dequeue_time_ns >= 0 else complete
        api = request.api_name
        version = request.context.header.api_version
        entry = self._request_metrics.get(api) or self._register_request_metrics(api)
        meter = entry.meters.get(version)
        record = (
            dequeue - start,
            local - dequeue,
            complete - local,
            rdequeue - complete,
            end_ns - rdequeue,
            end_ns - start,
            request.api_throttle_time_ms * 1_000_000,
            meter,
        )
        if meter is not None:
            entry.group.record(record)  # type: ignore[union-attr]  # meters: only with a group
        else:
            self._record_slow(entry, api, version, record)
        if api == "Fetch":  # Kafka's FetchRequest.isFromFollower (v15+: the replica_state's id)
            body = request.body or {}
            replica = (
                (body.get("replica_state") or {}).get("replica_id", -1) if version >= 15 else body.get("replica_id")
            )
            api = "FetchFollower" if replica is not None and replica >= 0 else "FetchConsumer"
            entry = self._request_metrics.get(api) or self._register_request_metrics(api)
            meter = entry.meters.get(version)
            if meter is not None:
                entry.group.record((*record[:-1], meter))  # type: ignore[union-attr]
            else:
                self._record_slow(entry, api, version, record)

    def _record_slow(self, entry: _ApiMetrics, api: str, version: int, record: tuple) -> None:
        """``update_request_metrics`` for a version seen first (its meter is registered here), or when some of the
        API's metric names were registered before (its histograms updated, its meter marked one by one)."""
        meter = entry.meters.get(version) or entry.marked.get(version)
        if meter is None:
            name = f"kafka.network:type=RequestMetrics,name=RequestsPerSec,request={api},version={version}"
            if entry.group is not None:
                meter = self.metrics.group_meter(name, entry.group)
                if isinstance(meter, GroupMeter) and meter._group is entry.group:
                    entry.meters[version] = meter
                else:
                    entry.marked[version] = meter
            else:
                meter = entry.marked[version] = self.metrics.meter(name)
        if entry.group is not None and meter is entry.meters.get(version):
            entry.group.record((*record[:-1], meter))
            return
        if entry.group is not None:
            entry.group.record((*record[:-1], None))
        else:
            for histogram, ns in zip(entry.histograms, record[:-1], strict=True):
                if histogram is not None:
                    histogram.update(max(0.0, ns / 1e6))
        meter.mark()

    def update_error_metrics(self, api: str, error_counts: dict[int, int]) -> None:
        """Kafka's updateErrorMetrics: mark ``ErrorsPerSec`` under ``request=<api>,error=<ERROR_NAME>`` by the
        count of each error code of a response (NONE included)."""
        for code, count in error_counts.items():
            meter = self._errors_per_sec.get((api, code))
            if meter is None:
                meter = self._errors_per_sec[(api, code)] = self.metrics.meter(
                    f"kafka.network:type=RequestMetrics,name=ErrorsPerSec,request={api},error={errors.name_of(code)}"
                )
            meter.mark(count)

    def _register_request_metrics(self, api: str) -> _ApiMetrics:
        """The seven histograms of ``api`` and their HistogramGroup (recorded with one queue append, folded on
        read; shared with another RequestChannel of the registry), looked up by name once. The group is None if
        some of the names were registered otherwise: those that are plain Histograms are then updated one by
        one (a name held by another group's histogram is recorded by that group's owner only)."""
        names = tuple(request_metric_name(metric, api) for metric in REQUEST_METRICS)
        group = self.metrics.histogram_group(names)
        if group is not None:
            histograms: tuple[Histogram | None, ...] = group.histograms
        else:
            registered = (self.metrics.get(name) for name in names)
            histograms = tuple(
                None if isinstance(m, GroupHistogram) else self.metrics.histogram(name)
                for name, m in zip(names, registered, strict=True)
            )
        return self._request_metrics.setdefault(api, _ApiMetrics(histograms, group))
