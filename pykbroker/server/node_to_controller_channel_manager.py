"""NodeToControllerChannelManager: requests from a broker to the active controller, wherever it is.

Mirrors Kafka's ``NodeToControllerChannelManagerImpl`` together with ``RaftControllerNodeProvider``. The
active controller is the leader of the metadata quorum, as this node's Raft client knows it (a broker is
a Raft observer). Its address is its entry in ``controller.quorum.voters``: the controller listener; in a dynamic
quorum (KIP-853) the addresses come from ``controller_addresses()``, asked again before each try (the voter set
in the metadata log and the leader endpoints the Raft channel learnt).
A request goes to that node. If the connection fails or the answer says NOT_CONTROLLER, it goes at once to
the next controller that has not failed it yet. This node's Raft client may not have heard of a new leader
yet, and a controller that is not active answers NOT_CONTROLLER at once. When every controller has
failed it, or no leader is known, the request is sent again after ``retry_backoff_ms``. So a request
"finds the new leader when the active controller changes", as soon as that leader is elected. This
continues until the request's own deadline. At the deadline the future fails with
:class:`~pykbroker.protocol.errors.KafkaTimeoutError` (REQUEST_TIMED_OUT): with no majority of
controllers there is no leader, and no write can commit.

Threading: :meth:`send_request` is thread-safe; the futures complete on the send thread (callbacks must
be quick).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import NamedTuple

from pykbroker.clients.inter_broker_send_thread import InterBrokerSendThread
from pykbroker.protocol import errors
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity
from pykbroker.utils.futures import set_exception_if_pending, set_result_if_pending
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time


def has_not_controller(body: dict) -> bool:
    """True when a controller's answer says NOT_CONTROLLER: at the top level, or for every entry of its
    result list (CreateTopics ``topics``, DeleteTopics ``responses``, CreatePartitions ``results`` ...)."""
    if body.get("error_code") == errors.NOT_CONTROLLER:
        return True
    for value in body.values():
        if isinstance(value, list) and value and all(isinstance(e, dict) for e in value):
            codes = [e.get("error_code") for e in value]
            if codes and all(c == errors.NOT_CONTROLLER for c in codes):
                return True
    return False


class _Call(NamedTuple):
    """One request on its way to the active controller (its tries share it)."""

    api_key: int
    version: int
    body: dict
    future: Future
    deadline: float
    unwrap: Callable[[dict], dict] | None


class NodeToControllerChannelManager:
    def __init__(
        self,
        node_id: int,
        controller_id: Callable[[], int],
        controller_addresses: dict[int, tuple[str, int]] | Callable[[], dict[int, tuple[str, int]]],
        name: str,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        time: Time = SYSTEM,
        security: ClientSecurity = PLAINTEXT,
    ):
        """``controller_id()`` returns the active controller's node id, or -1 when none is known;
        ``security``: how to reach the controller listener (ClientSecurity)."""
        self.node_id = node_id
        self.controller_id = controller_id
        self.time = time
        self.retry_backoff_ms = retry_backoff_ms
        self._log = get_logger("NodeToControllerChannelManager", nodeId=node_id, name=name)
        self.send_thread = InterBrokerSendThread(
            f"{name}-to-controller-channel-manager-{node_id}",
            f"{name}-{node_id}",
            request_timeout_ms=request_timeout_ms,
            time=time,
            security=security,
        )
        self._address_provider = controller_addresses if callable(controller_addresses) else None
        self._addresses: dict[int, tuple[str, int]] = {}
        self.controller_ids: frozenset[int] = frozenset()
        self._refresh_addresses(controller_addresses if isinstance(controller_addresses, dict) else None)

    def _refresh_addresses(self, addresses: dict[int, tuple[str, int]] | None = None) -> None:
        if addresses is None:
            if self._address_provider is None:
                return
            addresses = self._address_provider()
        for cid, address in addresses.items():
            if self._addresses.get(cid) != address:
                self.send_thread.set_address(cid, *address)
        self._addresses = dict(addresses)
        self.controller_ids = frozenset(addresses)

    def start(self) -> None:
        self.send_thread.start()

    def shutdown(self) -> None:
        self.send_thread.shutdown()

    def send_request(
        self, api_key: int, version: int, body: dict, timeout_ms: int, unwrap: Callable[[dict], dict] | None = None
    ) -> Future:
        """Send ``body`` to the active controller; the future gets the response dict, or
        KafkaTimeoutError once ``timeout_ms`` passed without an answer from an active controller. ``unwrap``
        turns each answer into the response first (an EnvelopeResponse into the forwarded request's response);
        the error it raises fails the future at once."""
        future: Future = Future()
        deadline = self.time.hi_res_milliseconds() + timeout_ms
        self._attempt(_Call(api_key, version, body, future, deadline, unwrap), None, frozenset())
        return future

    def _pick(self, failed: frozenset[int]) -> int:
        """The Raft leader as this node knows it; when that one just failed this request (it died, or is
        no longer active and this node has not heard of the new leader yet), the next controller that has
        not, so a new active controller is found as soon as it is elected. -1 when none is left."""
        leader = self.controller_id()
        if leader >= 0 and leader not in failed:
            return leader
        ids = sorted(self.controller_ids)
        start = ids.index(leader) + 1 if leader in ids else 0
        for node in ids[start:] + ids[:start]:
            if node not in failed:
                return node
        return -1

    def _attempt(self, call: _Call, last, failed: frozenset[int]) -> None:
        future = call.future
        if future.done():
            return
        now = self.time.hi_res_milliseconds()
        if now >= call.deadline:
            why = f" (last: {last})" if last else ""
            set_exception_if_pending(
                future, errors.KafkaTimeoutError(f"No answer from an active controller in time{why}")
            )
            return
        self._refresh_addresses()
        controller = self._pick(failed)
        if controller < 0:  # every controller failed this round: back off, then start over
            self._retry(call, last or "no active controller known", frozenset())
            return

        def on_response(response: dict | None, error: Exception | None) -> None:
            if error is None and response is not None and call.unwrap is not None:
                try:
                    response = call.unwrap(response)
                except Exception as e:  # noqa: BLE001 - the controller refused the envelope: no retry
                    set_exception_if_pending(future, e)
                    return
            if error is not None or response is None:
                why = f"controller {controller}: {error}"
            elif has_not_controller(response):
                why = f"node {controller} is not the controller"
            else:
                set_result_if_pending(future, response)
                return
            tried = failed | {controller}
            if len(tried) < len(self.controller_ids):  # try the next controller at once
                self.send_thread.schedule(0, lambda: self._attempt(call, why, tried))
            else:
                self._retry(call, why, frozenset())

        self.send_thread.send(controller, call.api_key, call.version, call.body, on_response)

    def _retry(self, call: _Call, why: str, failed: frozenset[int]) -> None:
        self._log.debug("Retrying a request to the controller", api_key=call.api_key, reason=why)
        delay = min(self.retry_backoff_ms, max(0.0, call.deadline - self.time.hi_res_milliseconds()))
        self.send_thread.schedule(delay, lambda: self._attempt(call, why, failed))
