"""ProducerIdControlManager: hands out blocks of producer ids (Kafka's ``ProducerIdControlManager``).

Each AllocateProducerIds call gets the next block of :data:`BLOCK_SIZE` ids and writes a
``ProducerIdsRecord`` whose ``next_producer_id`` is the first id after the block, so a restarted
controller never hands out an id twice. Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

from pykbroker.metadata.cluster_control_manager import ClusterControlManager
from pykbroker.metadata.controller_result import ControllerResult, api_error
from pykbroker.metadata.records import PRODUCER_IDS_RECORD, ApiMessageAndVersion, producer_ids_record
from pykbroker.protocol import errors

BLOCK_SIZE = 1000
MAX_PRODUCER_ID = 2**63 - 1


class ProducerIdControlManager:
    def __init__(self, cluster_control: ClusterControlManager):
        self.cluster = cluster_control
        self.next_producer_id = 0

    def generate_next_producer_id(self, broker_id: int, broker_epoch: int) -> ControllerResult[dict]:
        """AllocateProducerIds: response ``{error_code, error_message, producer_id_start,
        producer_id_len}`` and one ProducerIdsRecord. An unregistered broker or a stale epoch gets the
        matching error and no records."""
        try:
            self.cluster.check_broker_epoch(broker_id, broker_epoch)
        except errors.KafkaError as e:
            return ControllerResult([], {**api_error(e.code, e.message), "producer_id_start": -1, "producer_id_len": 0})
        start = self.next_producer_id
        if start > MAX_PRODUCER_ID - BLOCK_SIZE:
            return ControllerResult(
                [],
                {
                    **api_error(errors.UNKNOWN_SERVER_ERROR, "Exhausted all producerIds."),
                    "producer_id_start": -1,
                    "producer_id_len": 0,
                },
            )
        record = producer_ids_record(broker_id, broker_epoch, start + BLOCK_SIZE)
        return ControllerResult(
            [record], {**api_error(errors.NONE), "producer_id_start": start, "producer_id_len": BLOCK_SIZE}
        )

    def replay(self, record: ApiMessageAndVersion) -> None:
        if record.name != PRODUCER_IDS_RECORD:
            return
        nxt = record.data["next_producer_id"]
        if nxt < self.next_producer_id:
            raise ValueError(f"Producer id block went backwards: {nxt} < {self.next_producer_id}")
        self.next_producer_id = nxt
