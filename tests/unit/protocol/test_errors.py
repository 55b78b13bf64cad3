import ast
from pathlib import Path

import pytest

from pykbroker.protocol import errors


def test_one_explicit_class_per_code_named_after_kafkas_exception():
    # Every class is written out in the module's source (visible to grep and type checkers).
    tree = ast.parse(Path(errors.__file__).read_text())
    declared = {n.name for n in tree.body if isinstance(n, ast.ClassDef)} - {"KafkaError"}
    codes = [code for code in errors._NAMES if code != errors.NONE]
    assert len(declared) == len(codes)
    assert {errors.for_code(c).__name__ for c in codes} == declared
    assert errors.for_code(56) is errors.KafkaStorageError
    assert errors.for_code(3) is errors.UnknownTopicOrPartitionError
    assert errors.for_code(2) is errors.CorruptRecordError
    assert errors.for_code(87) is errors.InvalidRecordError
    assert errors.for_code(-1) is errors.UnknownServerError
    assert errors.for_code(7) is errors.KafkaTimeoutError


def test_each_error_is_declared_once_where_type_checkers_see_it():
    # Each class body declares its code, NAME and default message; each NAME is a module-level assignment
    # (not published through globals()), so that mypy and editors resolve ``errors.X``.
    tree = ast.parse(Path(errors.__file__).read_text())
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert set(errors._NAMES.values()) <= assigned
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name != "KafkaError":
            declared = {
                t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
            }
            assert {"code", "name", "default_message"} <= declared, node.name
    for code, name in errors._NAMES.items():
        assert getattr(errors, name) == code
        if code != errors.NONE:
            cls = errors.for_code(code)
            assert cls.name == name and issubclass(cls, errors.KafkaError)
            assert cls.__doc__.startswith(f"Kafka error {code} {name}")
    assert errors.NotLeaderOrFollowerError.retriable and not errors.InvalidRecordError.retriable
    assert errors.CORRUPT_MESSAGE == 2 and errors.UNKNOWN_TOPIC_OR_PARTITION == 3 and errors.NONE == 0
    assert errors.CorruptRecordError.default_message.startswith("This message has failed its CRC checksum")


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
