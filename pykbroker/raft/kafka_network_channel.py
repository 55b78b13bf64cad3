"""KafkaNetworkChannel: the Raft client's RPCs over the controller listener (Kafka's ``KafkaNetworkChannel``).

Outbound requests (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot) become protocol bodies
(:mod:`pykbroker.raft.raft_wire`) and travel on an
:class:`~pykbroker.clients.inter_broker_send_thread.InterBrokerSendThread` to the destination's address:
from ``controller.quorum.voters``, else (KIP-853) from ``controller.quorum.bootstrap.servers`` (negative ids -2,
-3, ... as Kafka's), the client's voter set (the endpoint on the controller listener) or the leader endpoint a
peer reported in a Fetch response's ``node_endpoints``; the leader adds its own endpoint there when it answers
a Fetch, so an observer that asked a bootstrap server can reach the leader it named. The response, or a
synthesized BROKER_NOT_AVAILABLE / REQUEST_TIMED_OUT-like error response when the node cannot be reached, goes
back to the client with ``client.handle``. That is Kafka's behaviour: the client sees a failed request and backs
off. A pre-vote (KIP-996) needs Vote v2: to a node that only speaks v0-1 it fails with UNSUPPORTED_VERSION (never
sent as a binding v1 vote), on which the client stands without pre-votes.

Inbound requests arrive from the controller listener's request handler (``RaftHandlers`` in the server).
It passes them to :meth:`handle_inbound` with a ``respond(body)`` callable. The channel gives the request
a local correlation id, hands it to the client, and sends the client's answer back with ``respond``, from
the Raft IO thread (the driver calls :meth:`send`).

Threading: :meth:`send` is called on the Raft IO thread; :meth:`handle_inbound` on request handler
threads; the response callbacks run on the send thread. The inbound table is guarded by a lock.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from pykbroker.clients.inter_broker_send_thread import InterBrokerSendThread
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.errors import (
    BROKER_NOT_AVAILABLE,
    INCONSISTENT_CLUSTER_ID,
    NONE,
    UNSUPPORTED_VERSION,
    UnsupportedVersionError,
)
from pykbroker.raft.kafka_raft_client import KafkaRaftClient
from pykbroker.raft.kafka_raft_client_driver import NetworkChannel
from pykbroker.raft.raft_messages import (
    FetchResponseData,
    RaftMessage,
    RaftRequest,
    RaftResponse,
    RequestData,
    ResponseData,
    VoteRequestData,
    error_response,
)
from pykbroker.raft.raft_wire import request_to_wire, response_from_wire, response_to_wire
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity
from pykbroker.utils.logging import get_logger
from pykbroker.utils.time import SYSTEM, Time

#: The newest version of each Raft RPC this channel sends (lowered to what the peer supports).
API_VERSIONS: dict[int, int] = {
    ApiKeys.VOTE: 2,
    ApiKeys.BEGIN_QUORUM_EPOCH: 1,
    ApiKeys.END_QUORUM_EPOCH: 1,
    ApiKeys.FETCH: 18,
    ApiKeys.FETCH_SNAPSHOT: 1,
    ApiKeys.UPDATE_RAFT_VOTER: 0,
}
PRE_VOTE_MIN_VERSION = 2
"""Vote v2 carries ``pre_vote`` (KIP-996)."""

Respond = Callable[[dict], None]


def parse_bootstrap_servers(servers: list[str] | None) -> dict[int, tuple[str, int]]:
    """``controller.quorum.bootstrap.servers`` entries ``host:port`` -> ``{-2: (host, port), -3: ...}`` (Kafka's
    ids of bootstrap servers). Raises ValueError on a malformed entry."""
    result: dict[int, tuple[str, int]] = {}
    for entry in servers or []:
        entry = entry.strip()
        if not entry:
            continue
        host, colon, port = entry.rpartition(":")
        if not colon or not host:
            raise ValueError(f"Unable to parse '{entry}': expected host:port")
        result[-2 - len(result)] = (host.strip("[]"), int(port))
    return result


def parse_voters(voters: list[str] | None) -> dict[int, tuple[str, int]]:
    """``controller.quorum.voters`` entries ``id@host:port`` -> ``{id: (host, port)}``. Raises ValueError
    on a malformed entry."""
    result: dict[int, tuple[str, int]] = {}
    for entry in voters or []:
        entry = entry.strip()
        if not entry:
            continue
        node, sep, address = entry.partition("@")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not host:
            raise ValueError(f"Unable to parse '{entry}': expected id@host:port")
        result[int(node)] = (host.strip("[]"), int(port))
    return result


class KafkaNetworkChannel(NetworkChannel):
    def __init__(
        self,
        node_id: int,
        voters: dict[int, tuple[str, int]],
        request_timeout_ms: int,
        time: Time = SYSTEM,
        on_inconsistent_cluster_id: Callable[[str], None] | None = None,
        security: ClientSecurity = PLAINTEXT,
        bootstrap: dict[int, tuple[str, int]] | None = None,
        listener: str | None = None,
    ):
        """``security``: how to reach the voters' controller listener (ClientSecurity); ``bootstrap``: the
        bootstrap servers by (negative) id; ``listener``: the controller listener name whose endpoint of a
        dynamic voter is used."""
        self.node_id = node_id
        self.voters = dict(voters)
        self.bootstrap = dict(bootstrap or {})
        self.listener = listener
        self._addresses_lock = threading.Lock()
        self._learned: dict[int, tuple[str, int]] = {}  # leader endpoints from node_endpoints; _addresses_lock
        self._set: dict[int, tuple[str, int]] = {}  # what the send thread was given; Raft IO thread
        self.on_inconsistent_cluster_id = on_inconsistent_cluster_id
        self._inconsistent: set[int] = set()  # voters that answered INCONSISTENT_CLUSTER_ID; send thread only
        self._reported = False
        self.time = time
        self.client: KafkaRaftClient | None = None
        self._log = get_logger("KafkaNetworkChannel", nodeId=node_id)
        self.send_thread = InterBrokerSendThread(
            f"kafka-{node_id}-raft-outbound-request-thread",
            f"raft-client-{node_id}",
            request_timeout_ms=request_timeout_ms,
            max_in_flight=1,
            time=time,
            security=security,
        )
        for voter_id, (host, port) in {**voters, **self.bootstrap}.items():
            self.send_thread.set_address(voter_id, host, port)
            self._set[voter_id] = (host, port)
        self._lock = threading.Lock()
        self._inbound: dict[int, Respond] = {}  # local correlation id -> respond; guarded by _lock
        self._ids = itertools.count(1)

    def start(self, client: KafkaRaftClient) -> None:
        self.client = client
        self.send_thread.start()

    def close(self, drain_ms: int = 0) -> None:
        """Stop sending; ``drain_ms`` lets queued requests (a resigning leader's EndQuorumEpoch) go first."""
        self.send_thread.shutdown(drain_ms=drain_ms)

    # ---- addresses (KIP-853) ------------------------------------------------------------------
    def resolve(self, node_id: int) -> tuple[str, int] | None:
        """The address of ``node_id``: static voter, bootstrap server, dynamic voter, learned leader."""
        found = self.voters.get(node_id) or self.bootstrap.get(node_id)
        if found is None and self.client is not None:
            voter_set = self.client.voter_set()
            found = voter_set.address(node_id, self.listener) if voter_set is not None else None
            if found is not None and found[1] == 0:
                found = None
        if found is None:
            with self._addresses_lock:
                found = self._learned.get(node_id)
        return found

    def controller_addresses(self) -> dict[int, tuple[str, int]]:
        """Every controller whose address is known (static voters, the voter set, learned leaders); safe from
        any thread (the broker's channel to the active controller asks)."""
        with self._addresses_lock:
            result = dict(self._learned)
        voter_set = self.client.voter_set() if self.client is not None else None
        if voter_set is not None:
            for voter_id in voter_set.ids():
                address = voter_set.address(voter_id, self.listener)
                if address is not None and address[1] != 0:
                    result[voter_id] = address
        result.update(self.voters)
        return result

    def _ensure_address(self, node_id: int) -> None:
        address = self.resolve(node_id)
        if address is not None and self._set.get(node_id) != address:
            self._set[node_id] = address
            self.send_thread.set_address(node_id, *address)

    def _leader_endpoints(self, data: ResponseData) -> list[dict]:
        """``node_endpoints`` of a Fetch response: the leader it names, when its address is known."""
        if not isinstance(data, FetchResponseData) or data.current_leader.leader_id < 0:
            return []
        address = self.resolve(data.current_leader.leader_id)
        if address is None:
            return []
        return [{"node_id": data.current_leader.leader_id, "host": address[0], "port": address[1], "rack": None}]

    # ---- the Raft IO thread -------------------------------------------------------------------
    def send(self, message: RaftMessage) -> None:
        if isinstance(message, RaftResponse):
            with self._lock:
                respond = self._inbound.pop(message.correlation_id, None)
            if respond is not None:
                body = response_to_wire(message.data, self.time.milliseconds())
                endpoints = self._leader_endpoints(message.data)
                if endpoints:
                    body["node_endpoints"] = endpoints
                respond(body)
            return
        self._ensure_address(message.destination_id)
        api_key, body = request_to_wire(message.data)
        request = message

        def on_response(response: dict | None, error: Exception | None) -> None:
            self._on_response(request, response, error)

        min_version = PRE_VOTE_MIN_VERSION if isinstance(message.data, VoteRequestData) and message.data.pre_vote else 0
        self.send_thread.send(message.destination_id, api_key, API_VERSIONS[api_key], body, on_response, min_version)

    def _on_response(self, request: RaftRequest, response: dict | None, error: Exception | None) -> None:
        assert self.client is not None
        data: ResponseData
        if isinstance(error, UnsupportedVersionError):
            data = error_response(request.data, UNSUPPORTED_VERSION)
        elif error is not None or response is None:
            self._log.debug("Raft request failed", destination=request.destination_id, error=str(error))
            data = error_response(request.data, BROKER_NOT_AVAILABLE)
        else:
            for endpoint in response.get("node_endpoints") or ():
                with self._addresses_lock:
                    self._learned[endpoint["node_id"]] = (endpoint["host"], endpoint["port"])
            try:
                data = response_from_wire(request.data.api_key, response)
            except Exception as e:  # noqa: BLE001 - a peer's malformed answer fails only this request
                self._log.warning("Malformed Raft response", destination=request.destination_id, error=repr(e))
                data = error_response(request.data, BROKER_NOT_AVAILABLE)
        self._check_cluster_id(request.destination_id, data.error_code)
        self.client.handle(RaftResponse(request.correlation_id, request.destination_id, self.node_id, data))

    def _check_cluster_id(self, source: int, error: int) -> None:
        """A node whose cluster id differs from the quorum's cannot join it. Every voter it asks answers
        INCONSISTENT_CLUSTER_ID; once a majority of the voters has done so, the node reports it once,
        through ``on_inconsistent_cluster_id`` (the server stops with one line). A node of the quorum
        that meets a single misconfigured voter never gets that many refusals."""
        if error == INCONSISTENT_CLUSTER_ID:
            self._inconsistent.add(source)
        elif error == NONE:
            self._inconsistent.discard(source)
        if self._reported or len(self._inconsistent) < len(self.voters) // 2 + 1:
            return
        self._reported = True
        message = (
            f"Node {self.node_id} cannot join the metadata quorum: voters {sorted(self._inconsistent)} answered "
            "INCONSISTENT_CLUSTER_ID (the cluster id in this node's meta.properties differs from the quorum's)"
        )
        self._log.error(message)
        if self.on_inconsistent_cluster_id is not None:
            self.on_inconsistent_cluster_id(message)

    # ---- request handler threads --------------------------------------------------------------
    def handle_inbound(self, source_id: int, data: RequestData, respond: Respond) -> None:
        """Hand an inbound Raft request from ``source_id`` to the client; ``respond(body)`` sends the
        answer (called later, on the Raft IO thread)."""
        assert self.client is not None
        correlation_id = next(self._ids)
        with self._lock:
            self._inbound[correlation_id] = respond
        self.client.handle(RaftRequest(correlation_id, source_id, self.node_id, data, self.time.hi_res_milliseconds()))
