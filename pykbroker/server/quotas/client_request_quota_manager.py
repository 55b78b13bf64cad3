"""ClientRequestQuotaManager: the ``request_percentage`` quota (KIP-124), Kafka's ``ClientRequestQuotaManager``.

**What is measured**: the time a request handler thread spent on each request (Kafka's
``requestThreadTimeNanos``: from the request's dequeue to the handler's local completion, or to now when the
response is sent from the handler), per user/client-id, as a percentage of one thread: a request taking
``t`` ns records ``t * 100 / 1e9`` and the quota window's rate of these values is the percentage of one
thread the client used (``request_percentage=200`` allows two threads' worth). Network thread time is added
as Kafka's ``recordNetworkThreadTimeCallback`` does: the KSelector sums each channel's read and write time, and
the Processor hands the sum to the request whose response it completed (:meth:`record_network_thread_time`,
recorded without a throttle of its own: it weighs on the client's next requests).

**Limits**, precedence and sharing are those of :class:`ClientQuotaManager` with the quota key
``request_percentage``. A client over its quota gets Kafka's throttle time ``(rate - limit) / limit * window``
bounded by one quota window (``quota.window.size.seconds``, Kafka's ``QuotaUtils.boundedThrottleTime``); the
:class:`~pykbroker.server.request_helper.RequestHelper` puts it in the response's ``throttle_time_ms`` and mutes
the channel for that time (KIP-219).

**Exempt requests** (Kafka's ``sendResponseExemptThrottle``: inter-broker and cluster actions, follower fetches,
acks=0 produce requests) are never throttled; their time is recorded in one broker-wide ``exempt-request-time``
rate (:meth:`record_exempt`). A cluster action refused with CLUSTER_AUTHORIZATION_FAILED is not exempt
(Kafka's ``RequestHandlerHelper.handleError``): only an authorized principal's cluster actions are.

No quota of this kind configured anywhere: :meth:`record_request_time` and :meth:`record_exempt` return at once
(Kafka's ``quotasEnabled``); the RequestHelper does not even call them (one attribute read per response).

Threading: called from request handler threads; the base class's lock guards the rates, a second lock the
exempt rate and the throttle-time averages.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.quotas.client_quota_manager import ClientQuotaManager
from pykbroker.server.quotas.sampled_rate import SampledRate
from pykbroker.utils.time import SYSTEM, Time

#: Kafka's ``ClientRequestQuotaManager.NanosToPercentagePerSecond``
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9

#: APIs whose responses Kafka sends with ``sendResponseExemptThrottle`` (the cluster actions: LeaderAndIsr,
#: StopReplica, UpdateMetadata, ControlledShutdown, WriteTxnMarkers, AlterPartition, and the controller's
#: node-to-node APIs). UpdateFeatures and DescribeQuorum are cluster actions that Kafka does throttle.
EXEMPT_APIS = frozenset(
    {
        ApiKeys.LEADER_AND_ISR,
        ApiKeys.STOP_REPLICA,
        ApiKeys.UPDATE_METADATA,
        ApiKeys.CONTROLLED_SHUTDOWN,
        ApiKeys.WRITE_TXN_MARKERS,
        ApiKeys.VOTE,
        ApiKeys.BEGIN_QUORUM_EPOCH,
        ApiKeys.END_QUORUM_EPOCH,
        ApiKeys.ALTER_PARTITION,
        ApiKeys.ENVELOPE,
        ApiKeys.BROKER_REGISTRATION,
        ApiKeys.BROKER_HEARTBEAT,
        ApiKeys.ALLOCATE_PRODUCER_IDS,
    }
)


class ClientRequestQuotaManager(ClientQuotaManager):
    """See the module docstring. ``samples``/``window_seconds``: ``quota.window.num`` and
    ``quota.window.size.seconds``."""

    def __init__(self, samples: int, window_seconds: int, time: Time = SYSTEM):
        super().__init__("Request", "request_percentage", samples, window_seconds, time)
        self.max_throttle_time_ms = window_seconds * 1000
        self._metrics_lock = threading.Lock()
        self.exempt_rate = SampledRate(samples, self.window_ms, time.milliseconds())

    def record_request_time(self, user: str, client_id: str, thread_time_ns: int) -> int:
        """Record ``thread_time_ns`` of handler time for the client; the throttle time in ms, at most one
        quota window (0 within its quota or without one). Kafka's ``maybeRecordAndGetThrottleTimeMs``."""
        return self.record_and_get_throttle_time_ms(user, client_id, thread_time_ns * NANOS_TO_PERCENTAGE_PER_SECOND)

    def record_network_thread_time(self, user: str, client_id: str, thread_time_ns: int) -> None:
        """Record network thread time of the client's request with its quota, without a throttle of its own (Kafka's
        ``recordNoThrottle`` from the ``recordNetworkThreadTimeCallback``): it counts toward the next requests'
        throttle."""
        if not self._limits:
            return
        now = self.time.milliseconds()
        with self._lock:
            found = self._lookup(user, client_id)
            if found is not None:
                self._rate(found[0], now).record(thread_time_ns * NANOS_TO_PERCENTAGE_PER_SECOND, now)

    def record_exempt(self, thread_time_ns: int) -> None:
        """Record an exempt request's handler time in the broker-wide ``exempt-request-time`` rate (Kafka's
        ``maybeRecordExempt``); nothing when no request quota is configured."""
        if not self.quotas_enabled:
            return
        now = self.time.milliseconds()
        with self._metrics_lock:
            self.exempt_rate.record(thread_time_ns * NANOS_TO_PERCENTAGE_PER_SECOND, now)

    def exempt_request_time(self) -> float:
        """``exempt-request-time``: the exempt requests' percentage of one thread over the quota window."""
        with self._metrics_lock:
            return self.exempt_rate.measure(self.time.milliseconds())

    # -- metrics (read at scrape time) ----------------------------------------------------------------
    def register_metrics(self, registry) -> None:
        """Kafka's ``Request`` quota metrics (JMX ``kafka.server:type=Request,user=<u>,client-id=<c>`` attributes
        ``request-time`` and ``throttle-time``; ``kafka.server:type=Request`` ``exempt-request-time`` and
        ``queue-size``), read at scrape time: Prometheus ``kafka_server_quota_request_time``,
        ``kafka_server_quota_throttle_time`` (labels ``resource="Request"``, ``user``, ``clientId``),
        ``kafka_server_quota_exempt_request_time`` and ``kafka_server_quota_queue_size`` (``resource="Request"``)."""
        keys = ("user", "clientId")
        registry.gauge_family("kafka.server:type=Request,name=request-time", keys, self.request_times)
        registry.gauge_family("kafka.server:type=Request,name=throttle-time", keys, self.throttle_times)
        registry.gauge("kafka.server:type=Request,name=exempt-request-time", self.exempt_request_time)
        registry.gauge("kafka.server:type=Request,name=queue-size", lambda: self.reaper.size)

    def request_times(self) -> Iterable[tuple[tuple[str, str], float]]:
        """``((user, client-id), request-time)`` per sharing key: the percentage of one thread used over the
        quota window (Kafka's ``request-time`` Rate, tagged as its quota level: an empty tag is not part of
        the quota's entity)."""
        now = self.time.milliseconds()
        with self._lock:
            return [(key, rate.measure(now)) for key, rate in self._rates.items()]

    def throttle_times(self) -> Iterable[tuple[tuple[str, str], float]]:
        """``((user, client-id), throttle-time)``: the mean non-zero throttle time (ms) answered, over two 30 s
        windows (Kafka's ``throttle-time`` Avg with the default metric config; NaN when none)."""
        now = self.time.milliseconds()
        with self._lock:
            return [(key, avg.measure(now)) for key, avg in self._throttle_avgs.items()]
