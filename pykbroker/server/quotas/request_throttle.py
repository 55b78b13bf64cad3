"""Throttling a response (KIP-219) by the request quota and the quota a handler already decided, as Kafka's
``RequestHandlerHelper.sendResponseMaybeThrottle`` / ``sendResponseExemptThrottle`` /
``sendResponseMaybeThrottleWithControllerQuota`` do.

A handler that decides a throttle itself (a produce or fetch byte rate, a controller mutation quota) calls
``RequestHelper.throttle(manager, request, ms)``, which only notes it on the request
(``Request.pending_throttle``). When the response is sent, :func:`apply` records the request's handler time
with the ``request_percentage`` quota (unless the request is exempt) and mutes the channel once, for the larger
of the two throttle times, through the manager that asked for it (Kafka throttles with the larger one's
manager); the response's ``throttle_time_ms`` becomes that larger time when the response has the field.

Threading: called on the thread that sends the response (a handler thread, or the thread completing a
purgatory or controller future); the managers are thread-safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

from pykbroker.protocol import errors, response_schema
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.quotas.client_quota_manager import user_of
from pykbroker.server.quotas.client_request_quota_manager import EXEMPT_APIS

if TYPE_CHECKING:
    from pykbroker.network.request_channel import Request, RequestChannel
    from pykbroker.server.quotas.client_quota_manager import QuotaManagers

_HAS_THROTTLE_FIELD: dict[int, bool] = {}


def has_throttle_field(api_key: int) -> bool:
    """Whether the API's response has ``throttle_time_ms`` (in some version)."""
    found = _HAS_THROTTLE_FIELD.get(api_key)
    if found is None:
        try:
            found = any(f.name == "throttle_time_ms" for f in response_schema(api_key).fields)
        except errors.KafkaError:
            found = False
        _HAS_THROTTLE_FIELD[api_key] = found
    return found


def is_exempt(request, body: dict | None) -> bool:
    """Kafka's exempt responses: cluster actions (unless refused CLUSTER_AUTHORIZATION_FAILED: an unauthorized
    principal is throttled, ``RequestHandlerHelper.handleError``), follower fetches, and the no-op response of
    an acks=0 produce (``body`` None)."""
    api_key = request.context.api_key
    if api_key in EXEMPT_APIS:
        return body is None or body.get("error_code") != errors.CLUSTER_AUTHORIZATION_FAILED
    if api_key == ApiKeys.FETCH:
        replica = (request.body or {}).get("replica_id", -1)
        return replica is not None and replica >= 0
    return body is None


def thread_time_ns(request, now_ns: int) -> int:
    """Kafka's ``requestThreadTimeNanos``: from the dequeue to the handler's local completion (set to now when
    the response is sent from the handler itself)."""
    if request.api_local_complete_time_ns < 0:
        request.api_local_complete_time_ns = now_ns
    dequeue = request.request_dequeue_time_ns
    if dequeue < 0:
        return 0
    return max(request.api_local_complete_time_ns - dequeue, 0)


class PendingThrottle:
    """What a request's response will be throttled by: the larger throttle asked so far (``manager``, ``ms``),
    and whether the request quota has recorded the request already (it records once)."""

    __slots__ = ("manager", "ms", "recorded")

    def __init__(self) -> None:
        self.manager = None
        self.ms = 0
        self.recorded = False

    def offer(self, manager, ms: int) -> None:
        if ms > self.ms:
            self.manager, self.ms = manager, ms


def _pending(request) -> PendingThrottle:
    pending = request.pending_throttle
    if pending is None:
        pending = request.pending_throttle = PendingThrottle()
    return pending


def note(request, manager, ms: int) -> None:
    """A handler's quota asks to throttle the response by ``ms`` (the larger ask wins)."""
    _pending(request).offer(manager, ms)


def record(quotas, request, body: dict | None) -> int:
    """Record the request's handler time with the request quota, once (exempt requests in the exempt rate); the
    request quota's throttle time (0 when exempt, within quota, without request quota, or recorded before)."""
    rq = quotas.request
    if not rq.quotas_enabled:
        return 0
    pending = _pending(request)
    if pending.recorded:
        return 0
    pending.recorded = True
    spent = thread_time_ns(request, rq.time.nanoseconds())
    if is_exempt(request, body):
        rq.record_exempt(spent)
        request.record_network_thread_time = rq.record_exempt
        return 0
    ctx = request.context
    user, client_id = user_of(ctx.principal), ctx.client_id or ""
    request.record_network_thread_time = lambda ns: rq.record_network_thread_time(user, client_id, ns)
    ms = rq.record_request_time(user, client_id, spent)
    pending.offer(rq, ms)
    return ms


@overload
def apply(quotas: QuotaManagers, request: Request, body: dict, channel: RequestChannel) -> dict: ...


@overload
def apply(quotas: QuotaManagers, request: Request, body: None, channel: RequestChannel) -> None: ...


def apply(quotas: QuotaManagers, request: Request, body: dict | None, channel: RequestChannel) -> dict | None:
    """Record the request quota (unless done already) and throttle the channel for the larger throttle; the body
    to send (a copy with ``throttle_time_ms`` raised when it changes). ``body`` None: a no-op response (nothing is
    sent)."""
    record(quotas, request, body)
    pending = request.pending_throttle
    request.pending_throttle = None
    if pending is None or pending.ms <= 0:
        return body
    ms = pending.ms
    request.api_throttle_time_ms = max(request.api_throttle_time_ms, ms)  # RequestMetrics' ThrottleTimeMs
    pending.manager.throttle(lambda: channel.start_throttling(request), lambda: channel.end_throttling(request), ms)
    if body is not None and body.get("throttle_time_ms", 0) < ms and has_throttle_field(request.context.api_key):
        body = {**body, "throttle_time_ms": ms}
    return body
