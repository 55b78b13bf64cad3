"""The ``pykbroker`` data source: batch and streaming reads, batch and streaming writes.

Mirrors Spark's ``KafkaSourceProvider``: ``KafkaBatch`` / ``KafkaMicroBatchStream`` for reads (one input
partition per topic-partition offset range, or more with ``minPartitions``) and ``KafkaWrite`` for the
at-least-once sink. Driver-side methods and read tasks each use their own client (see
:mod:`pyspark_pykbroker.client`); every read is a pure function of its range, so a retried task or a
re-planned micro-batch after a restart returns the same records.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

from pyspark_pykbroker import offsets as off
from pyspark_pykbroker.client import KafkaClient
from pyspark_pykbroker.options import SourceOptions
from pyspark_pykbroker.schema import schema_ddl

try:  # PySpark 4.2+
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - older PySpark: no admission control
    # mypy checks against PySpark 4.2+, where these names are classes
    ReadAllAvailable = ReadMaxRows = None  # type: ignore[misc, assignment]
    SupportsTriggerAvailableNow = object  # type: ignore[misc, assignment]


class RangePartition(InputPartition):
    """One offset range; ``leader`` is the (host, port) planning saw leading it, or None."""

    def __init__(self, topic: str, partition: int, start: int, end: int, leader: tuple[str, int] | None = None):
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self.leader = leader


class PyKBrokerDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "pykbroker"

    def schema(self) -> str:
        return schema_ddl(SourceOptions(self.options).bool("includeHeaders", False))

    def reader(self, schema):
        return KafkaBatchReader(SourceOptions(self.options))

    def streamReader(self, schema):
        return KafkaStreamReader(SourceOptions(self.options))

    def writer(self, schema, overwrite: bool):
        return KafkaBatchWriter(SourceOptions(self.options, sink=True))

    def streamWriter(self, schema, overwrite: bool):
        return KafkaStreamWriter(SourceOptions(self.options, sink=True))


# -- reads ---------------------------------------------------------------------------------------------
class _Reading:
    def __init__(self, options: SourceOptions):
        self.options = options
        self.fail_on_data_loss = options.bool("failOnDataLoss", True)
        self.include_headers = options.bool("includeHeaders", False)
        self.fast_fetch = options.bool("fastFetch", True)  # pyspark_pykbroker.fastfetch where it applies
        self.min_partitions = options.int("minPartitions")

    def client(self) -> KafkaClient:
        return KafkaClient(self.options.bootstrap, self.options.client_conf)

    def topic_partitions(self, client: KafkaClient) -> list[tuple[str, int]]:
        if self.options.strategy == "assign":
            return self.options.assigned_partitions()
        return client.topic_partitions(self.options.strategy, self.options.strategy_value)

    def resolve(self, client: KafkaClient, spec, tps, default: str, which: str) -> dict:
        """Concrete offsets for ``earliest``/``latest``/JSON (-2/-1) or the timestamp options."""
        marks = client.watermarks(tps)
        ts_all = self.options.get(f"{which}Timestamp")
        ts_json = self.options.get(f"{which}OffsetsByTimestamp")
        if ts_all is not None or ts_json is not None:
            times = {tp: int(ts_all) for tp in tps} if ts_all is not None else off.from_json(ts_json)
            found = client.offsets_for_times(times)
            return {tp: (o if o >= 0 else marks[tp][1]) for tp, o in found.items()}
        spec = spec if spec is not None else default
        if spec == "earliest":
            return {tp: marks[tp][0] for tp in tps}
        if spec == "latest":
            return {tp: marks[tp][1] for tp in tps}
        wanted = off.from_json(spec)
        out = {}
        for tp, o in wanted.items():
            if tp not in marks:
                marks.update(client.watermarks([tp]))
            out[tp] = marks[tp][0] if o == off.EARLIEST else marks[tp][1] if o == off.LATEST else o
        return out

    def read_partition(self, partition):
        if partition is None or not isinstance(partition, RangePartition):
            return iter(())
        client = self.client()
        return client.read_range(
            partition.topic,
            partition.partition,
            partition.start,
            partition.end,
            self.fail_on_data_loss,
            self.include_headers,
            fast_fetch=self.fast_fetch,
            leader=getattr(partition, "leader", None),
        )


class KafkaBatchReader(_Reading, DataSourceReader):
    def __init__(self, options: SourceOptions):
        super().__init__(options)
        starting = options.get("startingOffsets")
        ending = options.get("endingOffsets")
        if starting == "latest":
            raise ValueError("starting offset can't be latest for batch queries on Kafka")
        if ending == "earliest":
            raise ValueError("ending offset can't be earliest for batch queries on Kafka")
        if ending not in (None, "latest") and any(o == off.EARLIEST for o in off.from_json(ending).values()):
            raise ValueError("ending offset for a partition can't be earliest (-2) for batch queries on Kafka")
        client = self.client()
        try:
            tps = self.topic_partitions(client)
            start = self.resolve(client, starting, tps, "earliest", "starting")
            end = self.resolve(
                client, ending, tps if ending in (None, "latest") else sorted(off.from_json(ending)), "latest", "ending"
            )
            self.ranges = off.split_ranges(
                [r for r in off.plan_ranges(start, end) if r.end > r.start], self.min_partitions
            )
            # where each range is read from: tasks skip their own metadata and watermark requests
            self.leaders = (
                client.leaders({(r.topic, r.partition) for r in self.ranges}) if self.fast_fetch and self.ranges else {}
            )
        finally:
            client.close()

    def partitions(self):
        return [RangePartition(*r, leader=self.leaders.get((r.topic, r.partition))) for r in self.ranges]

    def read(self, partition):
        return self.read_partition(partition)


class KafkaStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions):
        super().__init__(options)
        self.max_offsets = options.int("maxOffsetsPerTrigger")
        self.available_now_target: dict | None = None

    def initialOffset(self) -> dict:
        client = self.client()
        try:
            tps = self.topic_partitions(client)
            return off.to_json(self.resolve(client, self.options.get("startingOffsets"), tps, "latest", "starting"))
        finally:
            client.close()

    def getDefaultReadLimit(self):
        if self.max_offsets is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.max_offsets)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        client = self.client()
        try:
            tps = self.topic_partitions(client)
            self.available_now_target = {tp: high for tp, (_, high) in client.watermarks(tps).items()}
        finally:
            client.close()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        client = self.client()
        try:
            tps = self.topic_partitions(client)
            latest = {tp: high for tp, (_, high) in client.watermarks(tps).items()}
            begin = off.from_json(start) if start else {}
            for tp, (low, _) in client.watermarks([tp for tp in latest if tp not in begin]).items():
                begin[tp] = low  # a partition discovered later starts at its earliest offset
        finally:
            client.close()
        if self.available_now_target is not None:
            latest = {tp: min(o, self.available_now_target.get(tp, begin.get(tp, o))) for tp, o in latest.items()}
        max_rows = getattr(limit, "max_rows", None)
        if max_rows is not None:
            latest = off.rate_limit(max_rows, begin, latest)
        latest = {tp: max(o, begin.get(tp, o)) for tp, o in latest.items()}
        return off.to_json(latest)

    def partitions(self, start: dict, end: dict):
        ranges = off.plan_ranges(off.from_json(start), off.from_json(end))
        return [RangePartition(*r) for r in off.split_ranges(ranges, self.min_partitions)]

    def read(self, partition):
        return self.read_partition(partition)

    def commit(self, end: dict) -> None:
        pass  # Spark's Kafka source commits nothing to Kafka: the checkpoint holds the offsets


# -- writes --------------------------------------------------------------------------------------------
class KafkaCommitMessage(WriterCommitMessage):
    def __init__(self, records: int):
        self.records = records


def _bytes(v):
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return str(v).encode()


class KafkaBatchWriter(DataSourceWriter):
    """At-least-once, as Spark's Kafka sink: a retried task sends its rows again."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self.topic = options.get("topic")

    def write(self, iterator):
        client = KafkaClient(self.options.bootstrap, self.options.client_conf)
        producer = client.producer()
        failures: list = []
        count = 0

        def on_delivery(err, _msg):
            if err is not None:
                failures.append(err)

        for row in iterator:
            fields = row.asDict() if hasattr(row, "asDict") else dict(row)
            topic = self.topic or fields.get("topic")
            if topic is None:
                raise ValueError(
                    "topic option required when no 'topic' attribute is present. Use the topic "
                    "option for setting a topic."
                )
            if "value" not in fields:
                raise ValueError("Required attribute 'value' not found")
            kwargs = {
                "key": _bytes(fields.get("key")),
                "value": _bytes(fields.get("value")),
                "on_delivery": on_delivery,
            }
            if fields.get("partition") is not None:
                kwargs["partition"] = int(fields["partition"])
            if fields.get("headers"):
                kwargs["headers"] = [(h["key"], _bytes(h["value"])) for h in fields["headers"]]
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.05)
            count += 1
            if count % 10000 == 0:
                producer.poll(0)
        remaining = producer.flush(120)
        if remaining or failures:
            raise RuntimeError(f"Kafka sink: {remaining} records not delivered, errors: {failures[:3]}")
        return KafkaCommitMessage(count)

    def commit(self, messages) -> None:
        pass

    def abort(self, messages) -> None:
        pass


class KafkaStreamWriter(KafkaBatchWriter, DataSourceStreamWriter):
    # Spark's DataSourceStreamWriter adds batchId to the batch writer's commit/abort; write() is shared
    def commit(self, messages, batchId) -> None:  # type: ignore[override]
        pass

    def abort(self, messages, batchId) -> None:  # type: ignore[override]
        pass
