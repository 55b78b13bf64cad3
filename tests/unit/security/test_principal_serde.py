"""The forwarded principal's bytes (Kafka's DefaultKafkaPrincipalBuilder serialize/deserialize, DefaultPrincipalData
v0 with an int16 version prefix)."""

from __future__ import annotations

import pytest

from pykbroker.protocol import errors
from pykbroker.security import principal_serde

#: what Kafka's DefaultKafkaPrincipalBuilder.serialize gives for User:alice (not token authenticated): version 0,
#: compact strings "User" and "alice", false, no tagged fields
ALICE = bytes.fromhex("0000") + b"\x05User" + b"\x06alice" + b"\x00" + b"\x00"


def test_serialize_is_kafkas_wire_format():
    assert principal_serde.serialize("User:alice") == ALICE
    assert principal_serde.serialize("User:alice", token_authenticated=True) == ALICE[:-2] + b"\x01\x00"


@pytest.mark.parametrize("principal", ["User:alice", "User:ANONYMOUS", "Group:ops:team", "User:", "User:\u00e9t\u00e9"])
def test_round_trip(principal):
    assert principal_serde.deserialize(principal_serde.serialize(principal)) == principal


def test_a_name_without_type_is_a_user():
    assert principal_serde.deserialize(principal_serde.serialize("bob")) == "User:bob"


@pytest.mark.parametrize(
    "data",
    [
        None,
        b"",
        b"\x00",
        b"\x00\x01" + ALICE[2:],  # a version this serde does not know
        b"\xff\xff" + ALICE[2:],
        ALICE[:6],  # truncated
        b"\x00\x00\x01\x01\x00\x00",  # empty type
        b"\x00\x00\x05Us",
    ],
)
def test_bytes_that_are_not_a_principal_are_a_deserialization_failure(data):
    with pytest.raises(errors.PrincipalDeserializationError) as e:
        principal_serde.deserialize(data)
    assert errors.for_exception(e.value) == errors.PRINCIPAL_DESERIALIZATION_FAILURE
