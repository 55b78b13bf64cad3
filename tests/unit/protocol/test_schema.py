"""The schema DSL parser and the schema table."""

from __future__ import annotations

import pytest

from pykbroker.protocol import ApiKeys, api_name, request_schema, response_schema
from pykbroker.protocol.metadata_records import METADATA_RECORDS
from pykbroker.protocol.schema import SchemaError, VersionRange, parse_schemas, snake_case
from pykbroker.protocol.schemas import REQUESTS, RESPONSES
from pykbroker.protocol.types import ZERO_UUID

DSL = """
# a comment
request Example 99 0-3 flex=2+
  name string 0+ null=1+ =null   # trailing comment
  ids []int32 1+
  items [] 0+
    key int16 0+ =-1
    inner {} 2+ null=3+
      flag bool 2+ =true
  extra uuid 2+ tag=4
"""


def test_parse_a_message():
    (schema,) = parse_schemas(DSL)
    assert (schema.name, schema.kind, schema.api_key, schema.full_name) == ("Example", "request", 99, "ExampleRequest")
    assert list(schema.versions) == [0, 1, 2, 3] and schema.is_flexible(2) and not schema.is_flexible(1)
    name, ids, items, extra = schema.fields
    assert (name.type, name.default, 0 in name.nullable_versions, 1 in name.nullable_versions) == (
        "string",
        None,
        False,
        True,
    )
    assert (ids.type, ids.element, ids.default_value()) == ("array", "int32", [])
    assert items.element == "struct" and [f.name for f in items.fields] == ["key", "inner"]
    assert items.fields[0].default == -1
    inner = items.fields[1]
    assert inner.type == "struct" and inner.default_value() == {"flag": True}
    assert (extra.tag, extra.is_tagged(2), extra.is_tagged(1), extra.default) == (4, True, False, ZERO_UUID)


@pytest.mark.parametrize(
    "text",
    [
        "request X 1 0 flex=none\n  a int9 0+",  # unknown type
        "request X 1 0 flex=none\n  a int32 0+ null=0+",  # ints are never nullable
        "request X 1 0 flex=none\n  a string 0+ =null",  # null default, not nullable
        "request X 1 0 flex=none\n  a int32 0+ tag=0",  # tagged outside flexible versions
        "request X 1 0 flex=0+\n  a int32 0+ tag=0\n  b int32 0+ tag=0",  # duplicate tag
        "request X 1 0 flex=none\n  a int32 0+\n  a int32 0+",  # duplicate name
        "request X 1 0 flex=none\n  a [] 0+",  # struct array without fields
        "request X 1 0 flex=none\n  a int32 0+\n      b int32 0+",  # indented too deep
        "request X 1 0 flex=none\n  a int32 0+\n    b int32 0+",  # children on a primitive
        "request X 1 0 flex=none\n   a int32 0+",  # odd indentation
        "  a int32 0+",  # field outside a message
        "request X 1 0",  # header without flex
        "request X 1 0 flex=none\n  a int8 0+ =300",  # default out of range
        "request X 1 0 flex=none\n  a int8 0+ bogus",  # unknown attribute
        "request X 1 0-x flex=none",  # bad version range
    ],
)
def test_malformed_schema_text(text):
    with pytest.raises(SchemaError):
        parse_schemas(text)


def test_version_ranges():
    assert 5 in VersionRange.parse("3+") and 2 not in VersionRange.parse("3+")
    assert 4 in VersionRange.parse("0-4") and 5 not in VersionRange.parse("0-4")
    assert VersionRange.parse("none").empty and 0 not in VersionRange.parse("none")
    assert [str(VersionRange.parse(s)) for s in ("3+", "0-4", "5", "none")] == ["3+", "0-4", "5", "none"]


def test_snake_case_follows_kafka():
    assert snake_case("PartitionIndex") == "partition_index"
    assert snake_case("KRaftVersion") == "kraft_version"
    assert snake_case("V3AndBelowTopics") == "v3_and_below_topics"
    assert snake_case("isKRaftController") == "is_kraft_controller"


REQUIRED = [
    0,
    1,
    2,
    3,
    8,
    9,
    10,
    11,
    12,
    13,
    14,
    15,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    32,
    33,
    35,
    37,
    42,
    44,
    47,
    60,
    61,
    75,
]


def test_the_table_has_every_api_the_broker_needs_with_kafka_version_ranges():
    assert set(REQUIRED) <= set(REQUESTS) and set(REQUESTS) == set(RESPONSES)
    expected = {
        ApiKeys.PRODUCE: "0-12",
        ApiKeys.FETCH: "0-18",
        ApiKeys.LIST_OFFSETS: "0-10",
        ApiKeys.METADATA: "0-13",
        ApiKeys.OFFSET_COMMIT: "0-10",
        ApiKeys.OFFSET_FETCH: "0-10",
        ApiKeys.DESCRIBE_GROUPS: "0-6",
        ApiKeys.LIST_TRANSACTIONS: "0-2",
        ApiKeys.API_VERSIONS: "0-4",
        ApiKeys.DESCRIBE_CLUSTER: "0-2",
        ApiKeys.SASL_HANDSHAKE: "0-1",
        ApiKeys.CREATE_TOPICS: "0-7",
        ApiKeys.OFFSET_DELETE: "0",
    }
    for key, versions in expected.items():
        assert str(request_schema(key).valid_versions) == versions
    assert request_schema(ApiKeys.SASL_HANDSHAKE).flexible_versions.empty
    for key, schema in REQUESTS.items():
        assert schema.name == api_name(key) == response_schema(key).name


def test_metadata_record_table():
    assert {0, 2, 3, 4, 5, 9, 12, 15, 20} <= set(METADATA_RECORDS)
    assert all(s.flexible_versions.lo == 0 and s.flexible_versions.hi is None for s in METADATA_RECORDS.values())
