"""Records of ``__transaction_state`` (Kafka's ``TransactionLog`` key and value formats) and the partition
of a transactional id.

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

import struct

from pykbroker.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from pykbroker.protocol.types import read_uvarint, write_uvarint

_H, _I, _Q, _B = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q"), struct.Struct(">b")
_VALUE_HEAD = struct.Struct(">hqhib")
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
    b = transactional_id.encode()
    return _H.pack(KEY_VERSION) + _H.pack(len(b)) + b


def value_bytes(t: TxnTransitMetadata, version: int = VALUE_VERSION) -> bytes:
    """The value of a transition at ``version`` (0, or 1: flexible); Kafka writes no partitions for
    Empty/Complete* states."""
    if t.txn_state is TransactionState.DEAD:
        raise ValueError("Dead transactions are not written to the log (a tombstone is)")
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(t.topic_partitions):
        by_topic.setdefault(topic, []).append(partition)
    if version == 1:
        return _flexible_value_bytes(t, by_topic)
    out = [
        _VALUE_HEAD.pack(VALUE_VERSION, t.producer_id, t.producer_epoch, t.txn_timeout_ms, int(t.txn_state)),
        _I.pack(len(by_topic)),
    ]
    for topic, partitions in by_topic.items():
        b = topic.encode()
        out.append(_H.pack(len(b)) + b + _I.pack(len(partitions)))
        out.extend(_I.pack(p) for p in partitions)
    out.append(_Q.pack(t.txn_last_update_timestamp) + _Q.pack(t.txn_start_timestamp))
    return b"".join(out)


def _flexible_value_bytes(t: TxnTransitMetadata, by_topic: dict[str, list[int]]) -> bytes:
    """TransactionLogValue v1: compact arrays and strings, tagged fields (tag 0 PreviousProducerId, 1
    NextProducerId, 2 ClientTransactionVersion), each written only when it is not its default."""
    out = bytearray(_VALUE_HEAD.pack(1, t.producer_id, t.producer_epoch, t.txn_timeout_ms, int(t.txn_state)))
    write_uvarint(out, len(by_topic) + 1)
    for topic, partitions in by_topic.items():
        b = topic.encode()
        write_uvarint(out, len(b) + 1)
        out += b
        write_uvarint(out, len(partitions) + 1)
        for p in partitions:
            out += _I.pack(p)
        write_uvarint(out, 0)  # no tagged fields
    out += _Q.pack(t.txn_last_update_timestamp) + _Q.pack(t.txn_start_timestamp)
    tags: list[tuple[int, bytes]] = []
    if t.prev_producer_id != NO_PRODUCER_ID:
        tags.append((0, _Q.pack(t.prev_producer_id)))
    if t.next_producer_id != NO_PRODUCER_ID:
        tags.append((1, _Q.pack(t.next_producer_id)))
    if t.client_transaction_version != 0:
        tags.append((2, _H.pack(t.client_transaction_version)))
    write_uvarint(out, len(tags))
    for tag, data in tags:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
    return bytes(out)


class _Reader:
    def __init__(self, buf):
        self.buf = memoryview(buf)
        self.pos = 0

    def take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise ValueError("transaction log record truncated")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def uvarint(self) -> int:
        try:
            v, self.pos = read_uvarint(self.buf, self.pos)
        except (IndexError, ValueError) as e:
            raise ValueError("transaction log record truncated") from e
        return v

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("transaction log record truncated")
        b = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return b

    def string(self, compact: bool) -> str:
        n = self.uvarint() - 1 if compact else self.take(_H)
        return self.raw(n).decode()

    def array_len(self, compact: bool) -> int:
        return self.uvarint() - 1 if compact else self.take(_I)

    def skip_tags(self) -> dict[int, bytes]:
        tags = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            tags[tag] = self.raw(self.uvarint())
        return tags


def key_version(key) -> int:
    """The version of a record key (a loader skips keys of a version it does not know, as Kafka's
    ``UnknownKey``); ValueError for a key shorter than its version."""
    return _Reader(key).take(_H)


def decode_key(key) -> str:
    """The transactional id of a record key; ValueError for an unknown key version."""
    r = _Reader(key)
    version = r.take(_H)
    if version != KEY_VERSION:
        raise ValueError(f"Unknown version {version} from the transaction log message key")
    return r.string(False)


def decode_value(transactional_id: str, value) -> TransactionMetadata:
    """The metadata a value describes (no pending state)."""
    r = _Reader(value)
    version = r.take(_H)
    if version not in (0, 1):
        raise ValueError(f"Unknown version {version} from the transaction log message value")
    compact = version >= 1
    producer_id = r.take(_Q)
    producer_epoch = r.take(_H)
    timeout = r.take(_I)
    state = TransactionState(r.take(_B))
    tps: set[tuple[str, int]] = set()
    n = r.array_len(compact)
    for _ in range(max(n, 0)):
        topic = r.string(compact)
        for _ in range(r.array_len(compact)):
            tps.add((topic, r.take(_I)))
        if compact:
            r.skip_tags()
    last_update = r.take(_Q)
    start = r.take(_Q)
    previous = following = NO_PRODUCER_ID
    client_version = 0
    if compact:
        tags = r.skip_tags()
        if len(tags.get(0, b"")) == 8:
            previous = _Q.unpack(tags[0])[0]
        if len(tags.get(1, b"")) == 8:
            following = _Q.unpack(tags[1])[0]
        if len(tags.get(2, b"")) == 2:
            client_version = _H.unpack(tags[2])[0]
    return TransactionMetadata(
        transactional_id,
        producer_id,
        previous_producer_id=previous,
        producer_epoch=producer_epoch,
        txn_timeout_ms=timeout,
        state=state,
        topic_partitions=tps,
        txn_start_timestamp=start,
        txn_last_update_timestamp=last_update,
        next_producer_id=following,
        client_transaction_version=client_version,
    )
