"""Response helpers shared by the API handlers (``kafka.server.RequestHandlerHelper``).

``send_response`` encodes a response body (a dict per the API's response schema) at the request's
version on the calling handler thread and hands the resulting send to the request's Processor.
Error responses come from :mod:`pykbroker.server.error_responses`.
"""
from __future__ import annotations

from pykbroker.network.channel import NetworkSend
from pykbroker.network.request_channel import Request, RequestChannel, SendResponse
from pykbroker.protocol import encode_response_parts


class RequestHelper:
    def __init__(self, request_channel_for):
        """``request_channel_for(request)`` returns the RequestChannel of the request's plane."""
        self.request_channel_for = request_channel_for

    def send_response(self, request: Request, body: dict, on_complete=None, version: int | None = None) -> None:
        h = request.context.header
        parts = encode_response_parts(h.api_key, h.api_version if version is None else version,
                                      h.correlation_id, body)
        channel: RequestChannel = self.request_channel_for(request)
        channel.send_response(SendResponse(request, NetworkSend(request.context.connection_id, parts), on_complete))

    def send_no_op_response(self, request: Request) -> None:
        self.request_channel_for(request).send_no_op_response(request)

    def close_connection(self, request: Request) -> None:
        self.request_channel_for(request).close_connection(request)
