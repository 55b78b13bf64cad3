"""KafkaApis: the thin dispatcher from API key to handler.

Mirrors ``kafka.server.KafkaApis.handle``: look up the handler registered for the request's API key and
call it on the handler thread; any exception becomes that API's error response (error code from
``errors.for_exception``, UNKNOWN_SERVER_ERROR for unexpected ones; see
:mod:`pykbroker.server.error_responses`) or, where the API cannot carry an error (acks=0 produce) or
the error response cannot be built, closes the connection. Handlers live in
:mod:`pykbroker.server.handlers`, one module per API family, each registering
``{api_key: callable(request)}`` through :meth:`register`.
Thread-safe: called concurrently by all request handler threads; holds no mutable state of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from pykbroker.network.request_channel import Request
from pykbroker.protocol import errors
from pykbroker.server.error_responses import build_error_response
from pykbroker.server.request_helper import RequestHelper
from pykbroker.utils.logging import get_logger


class KafkaApis:
    def __init__(self, node_id: int, request_helper: RequestHelper, time):
        self.node_id = node_id
        self.helper = request_helper
        self.time = time
        self.handlers: dict[int, Callable[[Request], None]] = {}
        self.after_handle: list[Callable[[], None]] = []  # e.g. ReplicaManager.try_complete_actions
        self.log = get_logger("KafkaApi", nodeId=node_id)

    def register(self, handlers: dict[int, Callable[[Request], None]]) -> None:
        for key, fn in handlers.items():
            self.handlers[int(key)] = fn

    @property
    def implemented_apis(self) -> set[int]:
        return set(self.handlers)

    def handle(self, request: Request) -> None:
        try:
            handler = self.handlers.get(request.context.api_key)
            if handler is None:
                raise errors.InvalidRequestError(f"Unhandled request API key {request.context.api_key}")
            handler(request)
        except Exception as e:
            self.handle_error(request, e)
        finally:
            for action in self.after_handle:
                try:
                    action()
                except Exception as e:
                    self.log.error("Error in post-handle action", error=repr(e))
            if request.api_local_complete_time_ns < 0:
                request.api_local_complete_time_ns = self.time.nanoseconds()

    def handle_error(self, request: Request, exc: BaseException) -> None:
        code = errors.for_exception(exc)
        if code == errors.UNKNOWN_SERVER_ERROR:
            self.log.error(f"Unexpected error handling request {request!r}", error=repr(exc), exc_info=exc)
        else:
            self.log.info(f"Error handling request {request!r}: {errors.name_of(code)}: {exc}")
        h = request.context.header
        try:
            body = build_error_response(h.api_key, h.api_version, request.body, code, str(exc) or None)
            if body is not None:
                self.helper.send_response(request, body)
                return
        except Exception as e:  # a response we cannot build or encode: the client must not wait forever
            self.log.error(
                f"Cannot build the error response to {request!r}; closing the connection", error=repr(e), exc_info=e
            )
        self.helper.close_connection(request)
