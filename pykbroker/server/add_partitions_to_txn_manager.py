"""AddPartitionsToTxnManager: partition leaders ask transaction coordinators whether a partition is in a
producer's transaction before its first transactional write (KIP-890 part 1), or add it to the transaction
(KIP-890 part 2: a Produce v12 of a transaction version 2 client, which sends no AddPartitionsToTxn itself).

Mirrors ``kafka.server.AddPartitionsToTxnManager``: an InterBrokerSendThread
(``AddPartitionsToTxnSenderThread-<id>``) sends AddPartitionsToTxn v4 with ``verify_only`` (verification), or v5
without it (the add, Kafka's ``addPartition`` operation), to the leader of the transactional id's
``__transaction_state`` partition (over the inter-broker listener, this broker included).
``callback({(topic, partition): error code})`` runs on that thread. Errors as Kafka hands them to the produce
path: the coordinator's per-partition answers, TRANSACTION_ABORTABLE as INVALID_TXN_STATE (Produce up to v11 and
TxnOffsetCommit up to v3 predate it; kept for a caller that says its request supports it, Kafka's
``genericError`` operation), PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, COORDINATOR_NOT_AVAILABLE
while the coordinator is unknown, NETWORK_EXCEPTION for a failed request.

Threading: ``verify_transaction`` is thread-safe (request handler threads); callbacks run on the sender
thread.
"""

from __future__ import annotations

from pykbroker.clients.inter_broker_send_thread import InterBrokerSendThread
from pykbroker.coordinator.transaction.transaction_log import partition_for
from pykbroker.metadata.topic_names import TRANSACTION_STATE_TOPIC_NAME
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.security.client_security import PLAINTEXT, ClientSecurity

_TRANSLATED = {
    errors.TRANSACTION_ABORTABLE: errors.INVALID_TXN_STATE,
    errors.PRODUCER_FENCED: errors.INVALID_PRODUCER_EPOCH,
}


class AddPartitionsToTxnManager:
    def __init__(
        self,
        node_id: int,
        metadata_cache,
        listener_name: str,
        time,
        request_timeout_ms: int = 30000,
        security: ClientSecurity = PLAINTEXT,
    ):
        self.cache = metadata_cache
        self.listener_name = listener_name
        self.send_thread = InterBrokerSendThread(
            f"AddPartitionsToTxnSenderThread-{node_id}",
            f"broker-{node_id}-txn-verifier",
            request_timeout_ms,
            time=time,
            security=security,
        )

    def start(self) -> None:
        self.send_thread.start()

    def shutdown(self) -> None:
        self.send_thread.shutdown()

    def verify_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        tps: list[tuple[str, int]],
        callback,
        transaction_abortable_supported: bool = False,
        add: bool = False,
    ) -> None:
        """Verify (``add`` False) or add (``add`` True) ``tps`` in the producer's transaction; ``callback({tp: error
        code})`` on the sender thread."""
        translated = dict(_TRANSLATED)
        if transaction_abortable_supported:
            del translated[errors.TRANSACTION_ABORTABLE]

        def all_(code: int) -> None:
            callback(dict.fromkeys(tps, code))

        topic = self.cache.topic(TRANSACTION_STATE_TOPIC_NAME)
        if topic is None:
            return all_(errors.COORDINATOR_NOT_AVAILABLE)
        registration = self.cache.partition(
            TRANSACTION_STATE_TOPIC_NAME, partition_for(transactional_id, len(topic.partitions))
        )
        leader = registration.leader if registration is not None else -1
        broker = self.cache.image.brokers.get(leader) if leader >= 0 else None
        endpoint = broker.listeners.get(self.listener_name) if broker is not None and not broker.fenced else None
        if endpoint is None:
            return all_(errors.COORDINATOR_NOT_AVAILABLE)
        self.send_thread.set_address(leader, endpoint.host, endpoint.port)
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        body = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "verify_only": not add,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                }
            ]
        }

        def answered(response, error) -> None:
            if error is not None or response is None:
                return all_(errors.NETWORK_EXCEPTION)
            if response.get("error_code", errors.NONE) != errors.NONE:
                return all_(translated.get(response["error_code"], response["error_code"]))
            codes = dict.fromkeys(tps, errors.UNKNOWN_SERVER_ERROR)
            for txn in response["results_by_transaction"]:
                for t in txn["topic_results"]:
                    for p in t["results_by_partition"]:
                        code = p["partition_error_code"]
                        codes[(t["name"], p["partition_index"])] = translated.get(code, code)
            callback(codes)
            return None

        self.send_thread.send(leader, ApiKeys.ADD_PARTITIONS_TO_TXN, 5 if add else 4, body, answered)
        return None
