"""Response helpers shared by the API handlers (``kafka.server.RequestHandlerHelper``).

``send_response`` encodes a response body (a dict per the API's response schema) at the request's
version on the calling handler thread and hands the resulting send to the request's Processor.
Error responses come from :mod:`pykbroker.server.error_responses`. Each response's error codes are counted
(:func:`error_counts`) into the RequestChannel's ErrorsPerSec meters, as Kafka's ``RequestChannel.sendResponse``
does with ``AbstractResponse.errorCounts``.
"""

from __future__ import annotations

from pykbroker.network.channel import NetworkSend
from pykbroker.network.request_channel import Request, RequestChannel, SendResponse
from pykbroker.protocol import encode_response_body, encode_response_parts, errors, response_frame
from pykbroker.protocol.codec import EncodedStruct
from pykbroker.server.error_responses import build_error_response
from pykbroker.server.quotas import request_throttle
from pykbroker.utils.logging import get_logger

_log = get_logger("RequestHelper")


_NO_ENTRY: dict = {}


def error_counts(body: dict) -> dict[int, int]:
    """The ``error_code`` fields of a response body counted by code: the top level's, its entries' (topics,
    groups, results...) and theirs (partitions), the levels where Kafka's ``errorCounts`` finds them. Only
    lists of dicts are walked, two levels deep, so records and other leaves are never looked at. The entries
    of one list share their schema, so the first entry says whether a list has error codes or nested lists
    at all: a list with neither (ApiVersions' ``api_keys``, Metadata's ``brokers``) costs one look. A pre-encoded
    entry (codec.EncodedStruct) adds the counts it carries."""
    counts: dict[int, int] = {}
    code = body.get("error_code")
    if code is not None:
        counts[code] = 1
    for value in body.values():
        if type(value) is not list or not value:
            continue
        first = value[0]
        if type(first) is not dict:
            if type(first) is not EncodedStruct:
                continue
            first = next((e for e in value if type(e) is dict), _NO_ENTRY)
        has_code = "error_code" in first
        nested = [k for k, v in first.items() if type(v) is list]
        if not has_code and not nested and first is not _NO_ENTRY:
            continue
        for entry in value:
            if type(entry) is EncodedStruct:  # pre-encoded (Metadata's cached topics): counted when encoded
                for code, n in entry.error_counts.items():
                    counts[code] = counts.get(code, 0) + n
                continue
            if has_code:
                code = entry.get("error_code")
                if code is not None:
                    counts[code] = counts.get(code, 0) + 1
            for key in nested:
                inner = entry.get(key)
                if type(inner) is not list or not inner or type(inner[0]) is not dict or "error_code" not in inner[0]:
                    continue
                for leaf in inner:
                    code = leaf.get("error_code")
                    if code is not None:
                        counts[code] = counts.get(code, 0) + 1
    return counts


class RequestHelper:
    def __init__(self, request_channel_for, authorizer=None, quotas=None, topic_name=None):
        """``request_channel_for(request)`` returns the RequestChannel of the request's plane."""
        self.request_channel_for = request_channel_for
        #: the StandardAuthorizer when ``authorizer.class.name`` names it (None: everything is allowed)
        self.authorizer = authorizer
        #: the broker's QuotaManagers (server/quotas), None on a controller-only listener
        self.quotas = quotas
        #: ``topic_name(topic id) -> name | None`` from the broker's metadata (authorizing requests that name
        #: topics by id, e.g. DeleteTopics v6+); None on a controller-only node
        self.topic_name = topic_name

    def _throttle_applies(self, request: Request) -> bool:
        """Whether the request quota (enabled) or a byte-rate throttle already pending on ``request`` may change its
        answer: ``request_throttle`` then records and applies them (a throttle_time_ms in the body, a muted
        channel)."""
        quotas = self.quotas
        return quotas is not None and (quotas.request.quotas_enabled or request.pending_throttle is not None)

    def authorize(self, request: Request, operation: int, resource_type: int, name: str) -> bool:
        """Kafka's AuthHelper.authorize: may the request's principal do ``operation`` on the resource?"""
        authorizer = self.authorizer
        if authorizer is None:
            return True
        ctx = request.context
        return authorizer.authorize(ctx.principal, ctx.client_address, operation, resource_type, name)

    def send_response(
        self,
        request: Request,
        body: dict,
        on_complete=None,
        version: int | None = None,
        counts: dict[int, int] | None = None,
    ) -> None:
        """Encode ``body`` and queue it for the request's Processor. A body that cannot be encoded at the
        request's version (a handler bug) is logged and replaced by the API's UNKNOWN_SERVER_ERROR
        response; if even that cannot be encoded the connection is closed. Either way the request is
        answered or its connection closed: a client never waits for a response that will not come.
        A forwarded request (``request.envelope``, KIP-590) is answered inside an EnvelopeResponse to its envelope;
        it is not throttled here (its ``throttle_time_ms`` goes back to the forwarding broker, which mutes its
        client, as Kafka's ``sendForwardedResponse``). ``counts``: the body's error codes counted as
        :func:`error_counts` would count them, when the handler knows them already (the body is then not walked)."""
        if request.envelope is not None:
            self._send_forwarded_response(request, body)
            return
        h = request.context.header
        version = h.api_version if version is None else version
        if self._throttle_applies(request):
            body = request_throttle.apply(self.quotas, request, body, self.request_channel_for(request))
        try:
            parts = encode_response_parts(h.api_key, version, h.correlation_id, body)
            if counts is None:
                counts = error_counts(body)
        except Exception as e:  # noqa: BLE001 - any encoding failure must still answer the request
            _log.error(f"Cannot encode the response to {request!r}; answering UNKNOWN_SERVER_ERROR", error=repr(e))
            parts = self._error_parts(request, version)
            if parts is None:
                self.close_connection(request)
                return
            counts = {errors.UNKNOWN_SERVER_ERROR: 1}
        channel: RequestChannel = self.request_channel_for(request)
        channel.update_error_metrics(request.api_name, counts)
        channel.send_response(SendResponse(request, NetworkSend(request.context.connection_id, parts), on_complete))

    def send_error_response(self, request: Request, error_code: int, message: str | None = None) -> None:
        """Answer ``request`` with its API's error response (Kafka's ``sendErrorResponseMaybeThrottle`` with
        ``AbstractRequest.getErrorResponse``: :func:`~pykbroker.server.error_responses.build_error_response`) carrying
        ``error_code`` and ``message``; a request whose API has no error response (no body) is closed instead."""
        ctx = request.context
        body = build_error_response(ctx.api_key, ctx.api_version, request.body, error_code, message)
        if body is None:
            self.close_connection(request)
        else:
            self.send_response(request, body)

    def try_send_frame(self, request: Request, encode, args: tuple, counts: dict[int, int]) -> bool:
        """Queue the complete response frame ``encode(api_version, correlation_id, *args)`` (a bytearray: size,
        header and body, or None when it cannot) as :meth:`send_response` would queue the body's, when nothing
        has to change the body on the way: the request came not in an Envelope and no request quota applies
        (either sets the body's ``throttle_time_ms`` or wraps it). ``counts``: the body's error codes, counted
        as :func:`error_counts` would. False (nothing sent, the caller then sends the body with
        :meth:`send_response`) when not, when ``encode`` answers None or raises."""
        if request.envelope is not None:
            return False
        if self._throttle_applies(request):
            return False
        h = request.context.header
        try:
            frame = encode(h.api_version, h.correlation_id, *args)
        except Exception:  # noqa: BLE001 - send_response then encodes the body (and reports a failure)
            return False
        if frame is None:
            return False
        channel: RequestChannel = self.request_channel_for(request)
        channel.update_error_metrics(request.api_name, counts)
        channel.send_response(SendResponse(request, NetworkSend(request.context.connection_id, [frame]), None))
        return True

    def send_encoded_response(
        self, request: Request, encoded_body: bytes, error_code: int = 0, body: dict | None = None
    ) -> None:
        """Queue a response whose body is already encoded for the request's version (a cached response);
        ``error_code`` is what ErrorsPerSec counts. ``body``: the dict it was encoded from, sent instead (encoded
        again) when a quota throttles the request, so that the response carries its ``throttle_time_ms``."""
        h = request.context.header
        if self._throttle_applies(request):
            given = body if body is not None else {"error_code": error_code}
            throttled = request_throttle.apply(self.quotas, request, given, self.request_channel_for(request))
            if body is not None and throttled is not body:
                encoded_body = encode_response_body(h.api_key, h.api_version, throttled)
        parts = response_frame(h.api_key, h.api_version, h.correlation_id, encoded_body)
        channel: RequestChannel = self.request_channel_for(request)
        channel.update_error_metrics(request.api_name, {error_code: 1})
        channel.send_response(SendResponse(request, NetworkSend(request.context.connection_id, parts), None))

    def _send_forwarded_response(self, request: Request, body: dict) -> None:
        from pykbroker.server.envelope import envelope_response

        try:
            wrapped = envelope_response(request, body)
        except Exception as e:  # noqa: BLE001 - a body that cannot be encoded still answers the envelope
            _log.error(f"Cannot encode the response to forwarded {request!r}", error=repr(e))
            wrapped = {"response_data": None, "error_code": errors.UNKNOWN_SERVER_ERROR}
        envelope = request.envelope
        assert envelope is not None  # only called for a request that came in an Envelope
        self.send_response(envelope, wrapped)

    @staticmethod
    def _error_parts(request: Request, version: int):
        h = request.context.header
        try:
            body = build_error_response(h.api_key, version, request.body, errors.UNKNOWN_SERVER_ERROR, None)
            return None if body is None else encode_response_parts(h.api_key, version, h.correlation_id, body)
        except Exception as e:  # noqa: BLE001 - no error response can be encoded: close the connection
            _log.error(f"Cannot encode an error response to {request!r}; closing the connection", error=repr(e))
            return None

    def throttle(self, quota_manager, request: Request, throttle_time_ms: int) -> None:
        """Kafka's ``RequestHandlerHelper.throttle``: mute the request's channel for ``throttle_time_ms`` after
        its response (call before sending the response). The mute starts when the response is sent, for the
        larger of this and the request quota's throttle (:mod:`pykbroker.server.quotas.request_throttle`)."""
        if throttle_time_ms <= 0 or request.envelope is not None:  # forwarded: the broker mutes its client
            return
        if self.quotas is None:  # a listener without the broker's quota managers: mute now
            request.api_throttle_time_ms = max(request.api_throttle_time_ms, throttle_time_ms)
            channel: RequestChannel = self.request_channel_for(request)
            quota_manager.throttle(
                lambda: channel.start_throttling(request), lambda: channel.end_throttling(request), throttle_time_ms
            )
            return
        request_throttle.note(request, quota_manager, throttle_time_ms)

    def record_request_quota(self, request: Request) -> int:
        """Record the request's handler time with the ``request_percentage`` quota now (it is recorded once: not
        again when the response is sent); the throttle time it asks for (0: none, exempt, or no request quota).
        The Fetch handler uses it to answer a throttled fetch empty (Kafka's handleFetchRequest)."""
        quotas = self.quotas
        if quotas is None or not quotas.request.quotas_enabled:
            return 0
        return request_throttle.record(quotas, request, {})

    def send_no_op_response(self, request: Request) -> None:
        """No response (acks=0 produce): exempt from the request quota; a byte-rate throttle still mutes."""
        if self._throttle_applies(request):
            request_throttle.apply(self.quotas, request, None, self.request_channel_for(request))
        self.request_channel_for(request).send_no_op_response(request)

    def close_connection(self, request: Request) -> None:
        self.request_channel_for(request).close_connection(request)
