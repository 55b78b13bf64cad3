"""KafkaRequestHandler threads and their pool: take requests off the RequestChannel, call KafkaApis.

Mirrors ``kafka.server.KafkaRequestHandler{,Pool}``. One pool per plane, named as in Kafka:

* data plane: threads ``data-plane-kafka-request-handler-<i>``, idle metric
  ``kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent``;
* control plane: threads ``control-plane-kafka-request-handler-<i>``, idle metric
  ``kafka.server:type=KafkaRequestHandlerPool,name=ControlPlaneRequestHandlerAvgIdlePercent``.

Log prefixes are ``[<plane> Kafka Request Handler on Broker <id>]`` for the pool and
``[Kafka Request Handler <i> on Broker <id>]`` for each thread. The data plane has ``num.io.threads``
threads, the control plane one. Each daemon thread loops on ``receive_request(300 ms)``; idle time
feeds the pool's idle metric; a ShutdownRequest stops one thread. Any exception escaping
``KafkaApis.handle`` is logged; the thread never dies of it.
"""

from __future__ import annotations

import threading
from time import monotonic as _monotonic
from time import sleep as _sleep

from pykbroker.network.request_channel import SHUTDOWN_REQUEST, Request, RequestChannel
from pykbroker.network.socket_server import CONTROL_PLANE, DATA_PLANE
from pykbroker.utils.logging import get_logger
from pykbroker.utils.metrics import MetricsRegistry
from pykbroker.utils.time import SYSTEM, Time


class KafkaRequestHandler(threading.Thread):
    def __init__(self, handler_id: int, node_id: int, pool: KafkaRequestHandlerPool):
        super().__init__(name=f"{pool.thread_name_prefix}-kafka-request-handler-{handler_id}", daemon=True)
        self.handler_id = handler_id
        self.pool = pool
        self.log = get_logger(f"Kafka Request Handler {handler_id} on Broker {node_id}")
        self.stopped = threading.Event()

    def run(self) -> None:
        pool = self.pool
        channel, apis = pool.request_channel, pool.apis
        nanoseconds = pool.time.nanoseconds  # SystemTime's is time.monotonic_ns itself (no Python frame per read)
        flush_wakeups = channel.flush_wakeups
        t0 = nanoseconds()
        while True:
            # the Processors this thread's last request answered through are woken only once this thread is
            # about to block for the next one (or has taken it), see RequestChannel.defer_wakeups
            request = channel.receive_request(300, flush_wakeups)
            t1 = nanoseconds()
            if request is None:
                pool.idle.record(t1 - t0, t1 - t0)
                t0 = t1
                continue
            if request is SHUTDOWN_REQUEST:
                pool.idle.record(t1 - t0, t1 - t0)
                self.stopped.set()
                return
            if isinstance(request, Request):
                request.request_dequeue_time_ns = t1
                channel.defer_wakeups()  # Processors are woken once this thread is done (flush_wakeups)
                try:
                    apis.handle(request)
                except Exception as e:  # KafkaApis answers errors itself; this is the last line of defence
                    self.log.error(
                        "Exception when handling request", request=repr(request), error=repr(e), exc_info=True
                    )
                finally:
                    request.release_buffer()
                    t2 = nanoseconds()  # this request's end is the next wait's start (one clock read shared)
                    pool.idle.record(t1 - t0, t2 - t0)
                    t0 = t2
            else:
                self.log.warning("Unexpected request type", request=repr(request))
                t0 = t1


# Kafka's DataPlaneAcceptor/ControlPlaneAcceptor ThreadPrefix -> MetricPrefix
METRIC_PREFIXES = {DATA_PLANE: "", CONTROL_PLANE: "ControlPlane"}


def idle_metric_name(thread_name_prefix: str) -> str:
    return (
        f"kafka.server:type=KafkaRequestHandlerPool,"
        f"name={METRIC_PREFIXES[thread_name_prefix]}RequestHandlerAvgIdlePercent"
    )


class KafkaRequestHandlerPool:
    """``num_threads`` KafkaRequestHandler threads for one plane (``thread_name_prefix``: ``data-plane`` or
    ``control-plane``), all reading the same RequestChannel and calling the same ``apis``."""

    def __init__(
        self,
        node_id: int,
        request_channel: RequestChannel,
        apis,
        num_threads: int,
        thread_name_prefix: str = DATA_PLANE,
        metrics: MetricsRegistry | None = None,
        time: Time = SYSTEM,
    ):
        if thread_name_prefix not in METRIC_PREFIXES:
            raise ValueError(f"Unknown request plane {thread_name_prefix!r}: expected one of {sorted(METRIC_PREFIXES)}")
        self.node_id = node_id
        self.request_channel = request_channel
        self.apis = apis
        self.time = time
        self.thread_name_prefix = thread_name_prefix
        metrics = metrics or MetricsRegistry()
        self.idle = metrics.idle_ratio(idle_metric_name(thread_name_prefix))
        self.log = get_logger(f"{thread_name_prefix} Kafka Request Handler on Broker {node_id}")
        self.handlers = [KafkaRequestHandler(i, node_id, self) for i in range(num_threads)]
        for h in self.handlers:
            h.start()

    def resize(self, num_threads: int) -> None:
        """Kafka's ``resizeThreadPool`` (dynamic ``num.io.threads``): start more handlers, or stop some
        (each stop request ends whichever handler takes it, after its current request)."""
        current = len(self.handlers)
        if num_threads > current:
            next_id = max((h.handler_id for h in self.handlers), default=-1) + 1
            for i in range(num_threads - current):
                handler = KafkaRequestHandler(next_id + i, self.node_id, self)
                self.handlers.append(handler)
                handler.start()
        elif num_threads < current:
            for _ in range(current - num_threads):
                self.request_channel.send_shutdown_request()
            deadline = _monotonic() + 10
            while _monotonic() < deadline and sum(h.stopped.is_set() for h in self.handlers) < current - num_threads:
                _sleep(0.01)
            self.handlers = [h for h in self.handlers if not h.stopped.is_set()]
        self.log.info("Resized the request handler pool", threads=len(self.handlers))

    def shutdown(self, timeout: float = 10.0) -> None:
        self.log.info("shutting down")
        for _ in self.handlers:
            self.request_channel.send_shutdown_request()
        for h in self.handlers:
            h.join(timeout)
        self.log.info("shut down completely")
