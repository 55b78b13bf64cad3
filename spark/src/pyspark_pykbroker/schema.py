"""The Kafka source schema, as Spark's: ``key binary, value binary, topic string, partition int,
offset long, timestamp timestamp, timestampType int`` (+ ``headers array<struct<key string, value
binary>>`` with ``includeHeaders=true``)."""

from __future__ import annotations

SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
HEADERS = "headers array<struct<key: string, value: binary>>"


def schema_ddl(include_headers: bool) -> str:
    return SCHEMA + (", " + HEADERS if include_headers else "")


def arrow_schema(include_headers: bool):
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(
            pa.field("headers", pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))
        )
    return pa.schema(fields)
