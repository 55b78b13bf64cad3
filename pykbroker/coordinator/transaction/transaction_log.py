"""Records of ``__transaction_state`` (Kafka's ``TransactionLog`` key and value formats) and the partition
of a transactional id: thin wrappers over the schema DSL (:mod:`pykbroker.protocol.coordinator_records`, Kafka's
``TransactionLogKey/Value`` specs).

* TransactionLogKey v0: ``version int16 (0), transactional_id string``.
* TransactionLogValue v0: ``version int16 (0), producer_id int64, producer_epoch int16,
  transaction_timeout_ms int32, transaction_status int8, transaction_partitions [topic string,
  partition_ids [int32]] (nullable), transaction_last_update_timestamp_ms int64,
  transaction_start_timestamp_ms int64``. v1 (flexible: compact strings/arrays and tagged fields, with
  PreviousProducerId/NextProducerId/ClientTransactionVersion as tags) is read too. Kafka writes v0 until the
  finalized ``transaction.version`` is 1 or more, then v1 (``TransactionVersion.transactionLogValueVersion``); so
  does :func:`value_bytes` (v1 with each tag that is not its default). The state manager also writes v1 for a
  version-2 transaction (KIP-890 part 2), whose next producer id and version v0 cannot hold.

A null value is a tombstone (the transactional id expired). Decoding raises ValueError on an unknown
version or a short buffer. Pure functions, no I/O.
"""

from __future__ import annotations

from pykbroker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from pykbroker.protocol.coordinator_records import RecordDecodeError, decode_record, encode_record, read_version

KEY_VERSION = 0
VALUE_VERSION = 0


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit wrap-around), signed."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount``."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def key_bytes(transactional_id: str) -> bytes:
    return encode_record("TransactionLogKey", KEY_VERSION, {"transactional_id": transactional_id})


def value_bytes(t: TxnTransitMetadata, version: int = VALUE_VERSION) -> bytes:
    """The value of a transition at ``version`` (0, or 1: flexible, with PreviousProducerId, NextProducerId and
    ClientTransactionVersion as tags written only when not their default); Kafka writes no partitions for
    Empty/Complete* states."""
    if t.txn_state is TransactionState.DEAD:
        raise ValueError("Dead transactions are not written to the log (a tombstone is)")
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(t.topic_partitions):
        by_topic.setdefault(topic, []).append(partition)
    value = {
        "producer_id": t.producer_id,
        "previous_producer_id": t.prev_producer_id,
        "next_producer_id": t.next_producer_id,
        "producer_epoch": t.producer_epoch,
        "transaction_timeout_ms": t.txn_timeout_ms,
        "transaction_status": int(t.txn_state),
        "transaction_partitions": [{"topic": k, "partition_ids": v} for k, v in by_topic.items()],
        "transaction_last_update_timestamp_ms": t.txn_last_update_timestamp,
        "transaction_start_timestamp_ms": t.txn_start_timestamp,
        "client_transaction_version": t.client_transaction_version,
    }
    return encode_record("TransactionLogValue", version, value)


def key_version(key) -> int:
    """The version of a record key (a loader skips keys of a version it does not know, as Kafka's
    ``UnknownKey``); ValueError for a key shorter than its version."""
    return read_version(key)


def decode_key(key) -> str:
    """The transactional id of a record key; ValueError for an unknown key version."""
    version = read_version(key)
    if version != KEY_VERSION:
        raise RecordDecodeError(f"Unknown version {version} from the transaction log message key")
    return decode_record("TransactionLogKey", key)[1]["transactional_id"]


def decode_value(transactional_id: str, value) -> TransactionMetadata:
    """The metadata a value (version 0 or 1) describes (no pending state); ValueError for another version, a short
    buffer or an unknown transaction state."""
    _, v = decode_record("TransactionLogValue", value)
    tps = {(p["topic"], pid) for p in v["transaction_partitions"] or () for pid in p["partition_ids"]}
    return TransactionMetadata(
        transactional_id,
        v["producer_id"],
        previous_producer_id=v["previous_producer_id"],
        producer_epoch=v["producer_epoch"],
        txn_timeout_ms=v["transaction_timeout_ms"],
        state=TransactionState(v["transaction_status"]),
        topic_partitions=tps,
        txn_start_timestamp=v["transaction_start_timestamp_ms"],
        txn_last_update_timestamp=v["transaction_last_update_timestamp_ms"],
        next_producer_id=v["next_producer_id"],
        client_transaction_version=v["client_transaction_version"],
    )
