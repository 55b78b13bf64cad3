"""One definition per protocol fact: ACL operations, permission types, resource and pattern types, config
resource types, API keys and error codes are defined in ``pykbroker/protocol`` only; no other module re-declares
one as a module constant (``READ = 3``, ``RESOURCE_BROKER = 4``), a name/code table (``{"TOPIC": 2}``,
``{3: "READ"}``) or a class of the same name."""

from __future__ import annotations

import ast
from pathlib import Path

import pykbroker
from pykbroker.protocol import errors
from pykbroker.protocol.acl import AclOperation, AclPermissionType
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.protocol.resource import PatternType, ResourceType

_ENUMS = (AclOperation, AclPermissionType, ApiKeys, ConfigResourceType, PatternType, ResourceType)
# Same name and value, another fact: the compression codec NONE (0) is not the error code NONE.
_UNRELATED = {("record/compression/compression.py", "NONE", 0)}


def _facts() -> set[tuple[str, int]]:
    facts = {(m.name, int(m)) for e in _ENUMS for m in e}
    return facts | {(name, code) for code, name in errors._NAMES.items()}


def _normalized(name: str) -> str:
    name = name.strip("_").upper()
    return name.removeprefix("RESOURCE_").removesuffix("_RESOURCE")


def _int(node: ast.expr) -> int | None:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    return value if type(value) is int else None


def _redeclarations(root: Path) -> list[str]:
    facts, enum_names = _facts(), {e.__name__ for e in _ENUMS}
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("protocol/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name in enum_names:
                found.append(f"{rel}:{node.lineno} class {node.name}")
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    pairs = []
                    if isinstance(target, ast.Name):
                        pairs = [(target, node.value)]
                    elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        pairs = list(zip(target.elts, node.value.elts, strict=True))
                    for name, value in pairs:
                        code = _int(value)
                        if isinstance(name, ast.Name) and code is not None:
                            key = (_normalized(name.id), code)
                            if key in facts and (rel, name.id, code) not in _UNRELATED:
                                found.append(f"{rel}:{node.lineno} {name.id} = {code}")
            elif isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values, strict=True):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str) and _int(v) is not None:
                        pair = (_normalized(k.value), _int(v))
                    elif (
                        isinstance(v, ast.Constant)
                        and isinstance(v.value, str)
                        and k is not None
                        and _int(k) is not None
                    ):
                        pair = (_normalized(v.value), _int(k))
                    else:
                        continue
                    if pair in facts:
                        found.append(f"{rel}:{node.lineno} {{{pair[0]!r}: {pair[1]}}}")
    return found


def test_protocol_facts_are_defined_once_in_the_protocol_package():
    assert _redeclarations(Path(pykbroker.__file__).parent) == []


def test_kafkas_codes():
    assert (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS, AclOperation.IDEMPOTENT_WRITE) == (13, 14, 12)
    assert (AclPermissionType.DENY, AclPermissionType.ALLOW) == (2, 3)
    assert (ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID, ResourceType.USER) == (3, 5, 7)
    assert (PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED) == (2, 3, 4)
    assert (ConfigResourceType.TOPIC, ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER) == (2, 4, 8)
    assert (ConfigResourceType.CLIENT_METRICS, ConfigResourceType.GROUP) == (16, 32)
