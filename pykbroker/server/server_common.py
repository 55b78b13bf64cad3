"""What KafkaRaftServer's parts (SharedServer, BrokerServer, ControllerServer) share while starting and
stopping: the StartupError they raise, the bounded start-up wait, how each plane's KafkaApis is assembled,
and their shutdown steps (:class:`ShutdownSteps`, :func:`run_steps`).

Mirrors the helpers Kafka's ``BrokerServer`` / ``ControllerServer`` share (``KafkaException`` on start-up
failures, ``FutureUtils.waitWithLogging``, ``ApiVersionManager``, ``CoreUtils.swallow``). Called on the thread
that starts or stops the server only.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pykbroker.config.broker_configs.security_configs import (
    ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG,
    AUTHORIZER_CLASS_NAME_CONFIG,
    SUPER_USERS_CONFIG,
)
from pykbroker.metadata.standard_authorizer import CLASS_NAMES as AUTHORIZER_CLASS_NAMES
from pykbroker.metadata.standard_authorizer import StandardAuthorizer
from pykbroker.protocol import errors, request_schema
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.raft.describe_quorum import describe_quorum
from pykbroker.server.api_version_manager import ApiVersionManager
from pykbroker.server.handlers.api_versions import ApiVersionsHandler
from pykbroker.server.handlers.describe_quorum import DescribeQuorumHandler
from pykbroker.server.kafka_apis import KafkaApis
from pykbroker.server.request_helper import RequestHelper
from pykbroker.utils.time import Time

if TYPE_CHECKING:  # start-up time (issue 31): a generated message type, for the type checker only
    from pykbroker.raft.describe_quorum import PartitionData


class StartupError(RuntimeError):
    """Start-up failed for a known reason that the message states completely (reported as one line,
    without a traceback): a listener could not be bound, a data directory is locked by another broker,
    a start-up wait timed out. Kafka throws ``KafkaException`` for these."""


class StartupWaits:
    """Every start-up wait of one server, bounded by ``initial.broker.registration.timeout.ms``
    (``timeout_ms``) and cut short by a fatal error (``fatal_error()``: its message, or None)."""

    def __init__(self, time: Time, timeout_ms: int, fatal_error: Callable[[], str | None]):
        self.time = time
        self.timeout_ms = timeout_ms
        self.timeout = timeout_ms / 1000.0
        self._fatal_error = fatal_error

    def result(self, future: concurrent.futures.Future, what: str) -> Any:
        """``future.result(timeout)``; StartupError naming ``what`` when it does not complete in time, or
        stating the fatal error (e.g. a cluster id mismatch) that stopped the wait."""
        timeout = self.timeout
        deadline = self.time.hi_res_milliseconds() + timeout * 1000
        while True:
            message = self._fatal_error()
            if message is not None:
                raise StartupError(message)
            left = (deadline - self.time.hi_res_milliseconds()) / 1000.0
            try:
                return future.result(max(0.0, min(0.1, left)))
            except concurrent.futures.TimeoutError as e:
                if left <= 0.1:
                    raise StartupError(f"Timed out after {int(timeout * 1000)} ms waiting for {what}") from e


def _schema_range(api_key: int) -> tuple[int, int]:
    schema = request_schema(api_key)
    hi = schema.valid_versions.hi
    assert hi is not None  # every request schema states a closed validVersions range
    return schema.valid_versions.lo, hi


def build_apis(
    node_id: int,
    helper: RequestHelper,
    time: Time,
    families: list,
    finalized_features: Callable[[], Any],
    controller_plane: bool = False,
) -> tuple[KafkaApis, ApiVersionManager]:
    """KafkaApis with the given handler families plus ApiVersions, which advertises what they implement
    (``finalized_features()``: what ApiVersions reports as finalized)."""
    apis = KafkaApis(node_id, helper, time, controller_plane)
    for family in families:
        apis.register(family.handlers())
    api_versions = ApiVersionsHandler(helper, features=finalized_features)
    apis.register(api_versions.handlers())
    api_versions.manager = ApiVersionManager(apis.implemented_apis, _schema_range)
    return apis, api_versions.manager


def create_authorizer(config, image_fn) -> StandardAuthorizer | None:
    """``authorizer.class.name``'s authorizer over ``image_fn()`` (an object with ``acls``), or None;
    StartupError for a class pykbroker does not have."""
    authorizer_class = (config[AUTHORIZER_CLASS_NAME_CONFIG] or "").strip()
    if not authorizer_class:
        return None
    if authorizer_class not in AUTHORIZER_CLASS_NAMES:
        raise StartupError(
            f"authorizer.class.name {authorizer_class} is not supported: use "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        )
    return StandardAuthorizer(image_fn, config[SUPER_USERS_CONFIG], config[ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG])


def describe_quorum_handler(
    helper: RequestHelper,
    shared,
    is_controller: bool,
    voter_endpoints: Callable[[], dict[int, list[tuple[str, str, int]]]],
) -> DescribeQuorumHandler:
    """DescribeQuorum answered from ``shared``'s (the SharedServer's) Raft client (``voter_endpoints()`` for
    v2 ``nodes``); both are looked up per request. A controller answers from its own Raft client
    (NOT_LEADER_OR_FOLLOWER unless it leads); a broker of a cluster asks the active controller, as Kafka's
    brokers forward DescribeQuorum."""

    def describe() -> PartitionData:
        partition = describe_quorum(shared.raft, shared.time.milliseconds())
        channel = shared.controller_channel
        if partition["error_code"] != errors.NOT_LEADER_OR_FOLLOWER or channel is None or is_controller:
            return partition
        body = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
        # Blocks this handler thread for one round trip to the leader (an operator's request, not a hot path).
        response = channel.send_request(ApiKeys.DESCRIBE_QUORUM, 2, body, 5000).result(10)
        return response["topics"][0]["partitions"][0]

    return DescribeQuorumHandler(helper, describe, voter_endpoints)


def run_steps(steps: list[tuple[str, Callable[[], object]]], log_error: Callable[[str, Exception], None]) -> None:
    """Run the shutdown ``steps`` (``(what, step)``) in order; a step that raises is reported with
    ``log_error(what, error)`` and the next steps still run. A part that was never started has no step."""
    for what, step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - the other components still shut down
            log_error(what, e)


class ShutdownSteps:
    """A server part's shutdown steps, in the order added (Kafka's ``BrokerServer.shutdown`` /
    ``ControllerServer.shutdown``, one ``CoreUtils.swallow`` per component): a component that is still
    None was never started and gets no step. Built and run on the thread that stops the server."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, Callable[[], object]]] = []

    def add(self, what: str, part: Any, stop: Callable[[Any], object] | None = None) -> None:
        """Stop ``part`` with ``stop(part)`` (default: ``part.shutdown()``), unless ``part`` is None."""
        if part is None:
            return
        self.steps.append((what, part.shutdown if stop is None else lambda: stop(part)))

    def run(self, log_error: Callable[[str, Exception], None]) -> None:
        """:func:`run_steps` over the steps added."""
        run_steps(self.steps, log_error)
