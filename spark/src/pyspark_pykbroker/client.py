"""The small Kafka client interface the source and sink use, backed by confluent-kafka (librdkafka).

Works against any Kafka broker. ``read_range`` returns Arrow record batches in Spark's Kafka schema
and stops at the first offset >= end (compaction and control records leave gaps); a range starting
below the log start offset raises :class:`DataLossError` (``failOnDataLoss=true``) or starts at the
log start offset instead; where it can, it reads through :mod:`pyspark_pykbroker.fastfetch` first.
Producers use ``partitioner=murmur2_random`` so keys land where the Java producer puts them.
Connections are opened lazily and never pickled.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import TYPE_CHECKING

from pyspark_pykbroker import fastfetch

if TYPE_CHECKING:
    from confluent_kafka import Consumer

FAST_FETCH_BYTES = 4 * 1024 * 1024  # fast path's partition_max_bytes unless kafka.max.partition.fetch.bytes
TIMESTAMP_TYPES = {1: 0, 2: 1}  # librdkafka CreateTime/LogAppendTime -> Spark's timestampType 0/1


class DataLossError(RuntimeError):
    pass


def data_loss_message(topic: str, partition: int, wanted: int, available: int) -> str:
    return (
        f"Cannot fetch offset {wanted} (TopicPartition: {topic}-{partition}); the earliest available offset is "
        f"{available}. Some data may have been lost because they are not available in Kafka any more; either "
        "the data was aged out by Kafka or the topic may have been deleted before all the data in the topic "
        "was processed. If you don't want your streaming query to fail on such cases, set the source option "
        '"failOnDataLoss" to "false".'
    )


class KafkaClient:
    def __init__(self, bootstrap: str, conf: dict | None = None):
        self.bootstrap = bootstrap
        self.conf = dict(conf or {})
        self._consumer: Consumer | None = None  # created on first use (confluent_kafka imported then)

    def __getstate__(self):
        return {"bootstrap": self.bootstrap, "conf": self.conf, "_consumer": None}

    def _base(self) -> dict:
        conf = {"bootstrap.servers": self.bootstrap}
        conf.update(self.conf)
        return conf

    def consumer(self):
        if self._consumer is None:
            from confluent_kafka import Consumer

            conf = self._base()
            conf.setdefault("group.id", f"spark-kafka-source-{uuid.uuid4()}")
            # Spark's Kafka source reads uncommitted data unless kafka.isolation.level says read_committed
            # (librdkafka's own default is read_committed).
            conf.setdefault("isolation.level", "read_uncommitted")
            conf.setdefault("max.partition.fetch.bytes", 10485760)  # a task reads one partition: fetch big
            conf.setdefault("fetch.max.bytes", 52428800)
            conf.setdefault("queued.max.messages.kbytes", 262144)
            conf.update({"enable.auto.commit": False, "enable.partition.eof": False})
            self._consumer = Consumer(conf)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # -- metadata and offsets ---------------------------------------------------------------------------
    def topic_partitions(self, strategy: str, value: str) -> list[tuple[str, int]]:
        metadata = self.consumer().list_topics(timeout=30)
        if strategy == "subscribe":
            names = [t.strip() for t in value.split(",") if t.strip()]
        else:
            pattern = re.compile(value)
            names = [t for t in metadata.topics if pattern.fullmatch(t) and not t.startswith("__")]
        out = []
        for name in names:
            t = metadata.topics.get(name)
            if t is None or t.error is not None:
                continue
            out += [(name, p) for p in t.partitions]
        return sorted(out)

    def watermarks(self, tps) -> dict[tuple[str, int], tuple[int, int]]:
        from confluent_kafka import TopicPartition

        c = self.consumer()
        return {tp: c.get_watermark_offsets(TopicPartition(tp[0], tp[1]), timeout=30, cached=False) for tp in tps}

    def offsets_for_times(self, times: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """First offset with timestamp >= the given ms per partition; -1 (latest) when there is none."""
        from confluent_kafka import TopicPartition

        if not times:
            return {}
        result = self.consumer().offsets_for_times(
            [TopicPartition(t, p, ts) for (t, p), ts in times.items()], timeout=30
        )
        return {(r.topic, r.partition): r.offset for r in result}

    def leader(self, topic: str, partition: int) -> tuple[str, int] | None:
        """(host, port) of the partition's leader from a Metadata request, None when unknown."""
        return self.leaders([(topic, partition)], topic).get((topic, partition))

    def leaders(self, tps, topic: str | None = None) -> dict[tuple[str, int], tuple[str, int]]:
        """(host, port) of each partition's leader from one Metadata request (of ``topic`` only, or of
        every topic); partitions without a known leader are left out."""
        metadata = self.consumer().list_topics(topic, timeout=30)
        out = {}
        for name, partition in tps:
            t = metadata.topics.get(name)
            p = t.partitions.get(partition) if t is not None and t.error is None else None
            broker = metadata.brokers.get(p.leader) if p is not None and p.error is None else None
            if broker is not None:
                out[(name, partition)] = (broker.host, broker.port)
        return out

    # -- reads -------------------------------------------------------------------------------------------
    def read_range(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        fail_on_data_loss: bool,
        include_headers: bool,
        batch_rows: int = 65536,
        fast_fetch: bool = True,
        leader: tuple[str, int] | None = None,
    ):
        """Arrow batches of the records with ``start <= offset < end`` (``start`` -2: log start).

        With ``fast_fetch`` (and options it serves, see :func:`fastfetch.usable`) the range is read by
        :mod:`pyspark_pykbroker.fastfetch` from the leader; librdkafka reads whatever it leaves. A
        ``leader`` (host, port) known from planning lets the fast path start before any watermark or
        metadata request (a start below the log start offset gets OFFSET_OUT_OF_RANGE there and is
        then checked as usual).
        """
        import pyarrow as pa
        from confluent_kafka import KafkaError, TopicPartition

        from pyspark_pykbroker.schema import arrow_schema

        fast = fast_fetch and fastfetch.usable(self.conf, include_headers)
        if fast and leader is not None and start >= 0:
            max_bytes = int(self.conf.get("max.partition.fetch.bytes", FAST_FETCH_BYTES))
            start = yield from fastfetch.read_fast(*leader, topic, partition, start, end, max_bytes, 30.0)
            if start >= end:
                return
        low, high = self.watermarks([(topic, partition)])[(topic, partition)]
        if start < 0:
            start = low
        if start < low:
            if fail_on_data_loss:
                raise DataLossError(data_loss_message(topic, partition, start, low))
            start = low
        end = min(end, high)
        if start >= end:
            self.close()
            return
        if fast:
            leader = self.leader(topic, partition)
            if leader is not None:
                max_bytes = int(self.conf.get("max.partition.fetch.bytes", FAST_FETCH_BYTES))
                try:
                    start = yield from fastfetch.read_fast(*leader, topic, partition, start, end, max_bytes, 30.0)
                finally:
                    if start >= end:
                        self.close()
                if start >= end:
                    return
        schema = arrow_schema(include_headers)
        c = self.consumer()
        c.assign([TopicPartition(topic, partition, start)])
        try:
            done = False
            next_offset = start
            idle_since = time.monotonic()
            while not done:
                offsets: list[int] = []
                keys, values, timestamps, types, headers = [], [], [], [], []
                while len(offsets) < batch_rows:
                    # consume() waits until it has as many messages as asked: never ask past ``end``.
                    want = max(1, min(10000, batch_rows - len(offsets), end - next_offset))
                    messages = c.consume(want, 0.2)
                    if not messages:
                        position = c.position([TopicPartition(topic, partition)])[0].offset
                        if position >= end:  # the range ends in a gap (compaction, control records)
                            done = True
                            break
                        if time.monotonic() - idle_since > 10:
                            raise TimeoutError(
                                f"No records from {topic}-{partition} at offset {next_offset} "
                                f"within 10 s (expected up to {end})"
                            )
                        continue
                    idle_since = time.monotonic()
                    last = messages[-1]
                    if last.error() is None and last.offset() < end and not any(m.error() for m in messages):
                        # Fast path (the common case): whole columns by comprehension.
                        keys += [m.key() for m in messages]
                        values += [m.value() for m in messages]
                        offsets += [m.offset() for m in messages]
                        stamps = [m.timestamp() for m in messages]
                        timestamps += [t[1] * 1000 for t in stamps]
                        types += [TIMESTAMP_TYPES.get(t[0], 0) for t in stamps]
                        if include_headers:
                            headers += [[{"key": k, "value": v} for k, v in (m.headers() or [])] for m in messages]
                        next_offset = offsets[-1] + 1
                        if next_offset >= end:
                            done = True
                            break
                        continue
                    for m in messages:
                        err = m.error()
                        if err is not None:
                            if err.code() == KafkaError._PARTITION_EOF:
                                continue
                            if err.code() == KafkaError.OFFSET_OUT_OF_RANGE and fail_on_data_loss:
                                raise DataLossError(data_loss_message(topic, partition, start, -1))
                            raise RuntimeError(f"Fetch {topic}-{partition}: {err}")
                        offset = m.offset()
                        if offset >= end:
                            done = True
                            break
                        next_offset = offset + 1
                        ts_type, ts = m.timestamp()
                        keys.append(m.key())
                        values.append(m.value())
                        offsets.append(offset)
                        timestamps.append(ts * 1000)
                        types.append(TIMESTAMP_TYPES.get(ts_type, 0))
                        if include_headers:
                            headers.append([{"key": k, "value": v} for k, v in (m.headers() or [])])
                    if done or (offsets and offsets[-1] >= end - 1):
                        done = True
                        break
                if offsets:
                    n = len(offsets)
                    columns = [
                        pa.array(keys, pa.binary()),
                        pa.array(values, pa.binary()),
                        pa.array([topic] * n, pa.string()),
                        pa.array([partition] * n, pa.int32()),
                        pa.array(offsets, pa.int64()),
                        pa.array(timestamps, pa.timestamp("us", tz="UTC")),
                        pa.array(types, pa.int32()),
                    ]
                    if include_headers:
                        columns.append(pa.array(headers, schema.field("headers").type))
                    yield pa.RecordBatch.from_arrays(columns, schema=schema)
        finally:
            self.close()

    # -- writes ------------------------------------------------------------------------------------------
    def producer(self):
        from confluent_kafka import Producer

        conf = self._base()
        conf.setdefault("partitioner", "murmur2_random")
        conf.setdefault("linger.ms", 5)
        conf.setdefault("acks", "all")
        return Producer(conf)
