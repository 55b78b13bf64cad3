"""Every broker and topic config key is spelt once: as a ``*_CONFIG`` constant next to its area's ConfigDef
(``pykbroker/config/broker_configs/``, Kafka's ``ServerLogConfigs.LOG_RETENTION_MS_CONFIG``...) or in
``pykbroker/config/topic_config.py`` (Kafka's ``TopicConfig``); the rest of the package imports the constant, so that
tools (and a reader) find every use of a key. An AST scan of ``pykbroker/`` flags any other string literal equal to a
key; the allow-list below names the few that are not broker or topic keys at all."""

from __future__ import annotations

import ast
from collections import Counter
from functools import cache
from pathlib import Path

import pykbroker
from pykbroker.config.broker_configs import server_log_configs
from pykbroker.config.kafka_config_def import BROKER_CONFIG_DEF
from pykbroker.log.log_config import TOPIC_CONFIG_DEF

PACKAGE = Path(pykbroker.__file__).resolve().parent
DEFINITIONS = ("config/broker_configs/", "config/topic_config.py")
KEYS = frozenset(BROKER_CONFIG_DEF.keys) | frozenset(TOPIC_CONFIG_DEF.keys)

#: (path under pykbroker/, key) -> why the literal is not a use of the broker/topic key
ALLOWED = {
    **dict.fromkeys(
        [
            ("clients/consumer/kafka_consumer.py", "fetch.max.bytes"),
            ("clients/consumer/kafka_consumer.py", "request.timeout.ms"),
            ("clients/producer/kafka_producer.py", "compression.type"),
            ("clients/producer/producer_config.py", "compression.type"),
            ("clients/producer/producer_config.py", "request.timeout.ms"),
            ("clients/producer/sender.py", "request.timeout.ms"),
            ("tools/console_producer.py", "compression.type"),
        ],
        "a client's own config (Kafka's ProducerConfig/ConsumerConfig), which only shares the broker key's name",
    ),
    **dict.fromkeys(
        [
            ("metadata/cluster_control_manager.py", "listeners"),
            ("server/handlers/describe_quorum.py", "listeners"),
            ("server/handlers/raft_voters.py", "listeners"),
            ("raft/raft_wire.py", "listeners"),
            ("tools/metadata_quorum_command.py", "listeners"),
        ],
        "a field of the BrokerRegistration / DescribeQuorum messages",
    ),
    **dict.fromkeys(
        [
            ("server/meta_properties.py", "cluster.id"),
            ("server/meta_properties.py", "node.id"),
            ("server/meta_properties.py", "broker.id"),
        ],
        "the definition of a meta.properties key (Kafka's MetaProperties.*_PROP)",
    ),
}


def _literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _is_definition(relative: str) -> bool:
    return relative.startswith(DEFINITIONS)


def raw_key_literals(package: Path = PACKAGE) -> list[tuple[str, int, str]]:
    """``(path under the package, line, key)`` of every string literal equal to a broker/topic key outside the
    definition modules."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if _is_definition(relative):
            continue
        found += [(relative, line, value) for line, value in _literals(path) if value in KEYS]
    return found


@cache
def _package_literals() -> list[tuple[str, int, str]]:
    return raw_key_literals()


def test_no_config_key_is_spelt_as_a_raw_string_outside_its_definition():
    unexpected = [
        f"pykbroker/{path}:{line}: {key!r}" for path, line, key in _package_literals() if (path, key) not in ALLOWED
    ]
    assert unexpected == [], (
        "import the key's *_CONFIG constant from pykbroker/config/broker_configs/ or topic_config.py"
    )


def test_the_allow_list_holds_only_literals_still_there():
    used = {(path, key) for path, _, key in _package_literals()}
    assert set(ALLOWED) <= used, sorted(set(ALLOWED) - used)


def test_each_key_is_one_constant_in_the_definitions():
    """In the definition modules a key appears once, as ``KEY_NAME_CONFIG = "key.name"`` (a key that is both a broker
    and a topic key is the topic constant, imported by its broker area module)."""
    assigned: Counter[str] = Counter()
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if not _is_definition(relative):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value in KEYS:
                (target,) = node.targets
                expected = node.value.value.upper().replace(".", "_") + "_CONFIG"
                assert isinstance(target, ast.Name) and target.id == expected, (relative, node.lineno)
                assigned[node.value.value] += 1
                constants.add(id(node.value))
        stray += [
            (relative, n.lineno, n.value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and n.value in KEYS and id(n) not in constants
        ]
    assert stray == []
    assert set(assigned) == KEYS
    assert [key for key, count in assigned.items() if count != 1] == []


def test_the_scan_sees_a_raw_key(tmp_path):
    """The guard is not vacuous: a module that reads ``config["log.retention.ms"]`` is reported."""
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "x.py").write_text('def f(config):\n    return config["log.retention.ms"]\n')
    assert raw_key_literals(tmp_path) == [("server/x.py", 2, "log.retention.ms")]
    assert server_log_configs.LOG_RETENTION_MS_CONFIG == "log.retention.ms"
