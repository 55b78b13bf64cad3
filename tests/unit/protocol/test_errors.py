import ast
from pathlib import Path

import pytest

from pykbroker.protocol import errors


def test_one_explicit_class_per_code_named_after_kafkas_exception():
    # Every class is written out in the module's source (visible to grep and type checkers).
    tree = ast.parse(Path(errors.__file__).read_text())
    declared = {n.name for n in tree.body if isinstance(n, ast.ClassDef)} - {"KafkaError"}
    codes = [code for code, *_ in errors._TABLE if code != errors.NONE]
    assert len(declared) == len(codes)
    assert {errors.for_code(c).__name__ for c in codes} == declared
    assert errors.for_code(56) is errors.KafkaStorageError
    assert errors.for_code(3) is errors.UnknownTopicOrPartitionError
    assert errors.for_code(2) is errors.CorruptRecordError
    assert errors.for_code(87) is errors.InvalidRecordError
    assert errors.for_code(-1) is errors.UnknownServerError
    assert errors.for_code(7) is errors.KafkaTimeoutError


def test_class_attributes_come_from_the_table():
    for code, name, retriable, message in errors._TABLE:
        if code == errors.NONE:
            continue
        cls = errors.for_code(code)
        assert (cls.code, cls.name, cls.retriable, cls.default_message) == (code, name, retriable, message)
        assert issubclass(cls, errors.KafkaError)
    assert errors.NotLeaderOrFollowerError.retriable and not errors.InvalidRecordError.retriable


def test_messages_codes_and_lookups():
    assert str(errors.KafkaStorageError()) == "Disk error when trying to access log file on the disk."
    e = errors.UnknownTopicOrPartitionError("no such partition t-0")
    assert e.message == "no such partition t-0" and errors.for_exception(e) == 3
    assert errors.for_exception(ValueError("x")) == errors.UNKNOWN_SERVER_ERROR == -1
    assert errors.for_code(9999) is errors.UnknownServerError
    assert errors.name_of(0) == "NONE" and errors.name_of(2) == "CORRUPT_MESSAGE"
    assert errors.name_of(9999) == "UNKNOWN_SERVER_ERROR"
    with pytest.raises(ValueError):
        errors.for_code(errors.NONE)
