"""Start-up imports (issue 31, suite time): what a broker process imports before it listens.

Each test runs a fresh interpreter (``sys.modules`` of this test process says nothing) that imports what
``kafka-server-start`` imports before the broker starts, as the console script does (``argv[0]``), and checks
that optional subsystems a default configuration does not use stay unimported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

NODE_IMPORTS = (
    "import pykbroker.kafka\n"
    "from pykbroker.utils import logging as plog\n"
    "from pykbroker.config.kafka_config import KafkaConfig\n"
    "from pykbroker.server.kafka_raft_server import KafkaRaftServer\n"
)
# a combined node (process.roles=broker,controller) imports both roles' servers when it starts
BROKER_IMPORTS = NODE_IMPORTS + "import pykbroker.server.broker_server, pykbroker.server.controller_server\n"


def run_probe(code: str, argv0: str, expr: str) -> object:
    """Run ``code`` in a fresh interpreter with ``sys.argv[0] = argv0``; the value of ``expr`` (JSON) after it."""
    script = f"import sys, json\nsys.argv[0] = {argv0!r}\n{code}\nprint(json.dumps({expr}))\n"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def imported(code: str, argv0: str, probes: list[str]) -> dict[str, bool]:
    """Which of ``probes`` are in ``sys.modules`` after ``code`` (see :func:`run_probe`)."""
    return run_probe(code, argv0, f"{{m: m in sys.modules for m in {probes!r}}}")  # type: ignore[return-value]


def test_broker_process_does_not_import_rich():
    # structlog imports rich (and pygments) when installed; pykbroker renders its own lines
    seen = imported(BROKER_IMPORTS, "kafka-server-start", ["structlog", "rich", "pygments"])
    assert seen == {"structlog": True, "rich": False, "pygments": False}


def test_broker_process_does_not_import_unused_codecs():
    # the compression libraries load on the first batch of their codec (a default broker may never see one)
    seen = imported(BROKER_IMPORTS, "kafka-server-start", ["zstandard", "lz4", "cramjam"])
    assert seen == {"zstandard": False, "lz4": False, "cramjam": False}


def test_codec_library_loads_on_first_use():
    code = BROKER_IMPORTS + (
        "from pykbroker.record import compression\n"
        "zstd = compression.for_id(4)\n"
        "assert zstd.decompress(zstd.compress(b'x' * 100)) == b'x' * 100\n"
    )
    assert run_probe(code, "kafka-server-start", "['zstandard' in sys.modules, 'lz4' in sys.modules]") == [True, False]


def test_broker_process_does_not_import_generated_message_types():
    # pykbroker.protocol.messages: TypedDicts for the type checker, not needed at run time
    code = BROKER_IMPORTS
    assert (
        run_probe(code, "kafka-server-start", "[m for m in sys.modules if m.startswith('pykbroker.protocol.messages')]")
        == []
    )


def test_broker_process_skips_crc32c_package_init():
    # crc32c/__init__.py reads its version through importlib.metadata and imports its CLI (argparse)
    seen = imported(BROKER_IMPORTS, "kafka-server-start", ["crc32c", "importlib.metadata", "argparse"])
    assert seen == {"crc32c": False, "importlib.metadata": False, "argparse": False}


def test_crc_is_the_crc32c_package_function():
    import crc32c

    from pykbroker.record.crc import crc32c as crc

    assert crc is crc32c.crc32c or crc(b"123456789") == crc32c.crc32c(b"123456789") == 0xE3069283
    assert crc(b"6789", crc(b"12345")) == 0xE3069283  # the running crc, as the batch builder uses it


def test_broker_process_does_not_import_sasl_servers_or_jwt():
    # without a SASL listener the SASL servers, OAUTHBEARER's validation and JWT/cryptography are not loaded
    probes = [
        "pykbroker.security.oauthbearer",
        "pykbroker.security.plain",
        "pykbroker.security.sasl_server_authenticator",
        "jwt",
        "cryptography",
        "prometheus_client",
    ]
    assert imported(BROKER_IMPORTS, "kafka-server-start", probes) == dict.fromkeys(probes, False)


def test_oauthbearer_name_is_the_mechanism_module_one():
    from pykbroker.security import channel_builders, oauthbearer

    assert channel_builders.OAUTHBEARER == oauthbearer.MECHANISM


def test_dedicated_controller_does_not_import_the_broker():
    # process.roles=controller: KafkaRaftServer imports the ControllerServer only
    code = NODE_IMPORTS + "import pykbroker.server.controller_server\n"
    probes = [
        "pykbroker.server.broker_server",
        "pykbroker.server.replica_manager",
        "pykbroker.coordinator.group.group_coordinator",
        "pykbroker.server.share.share_partition_manager",
    ]
    assert imported(code, "kafka-server-start", probes) == dict.fromkeys(probes, False)


def test_embedding_program_keeps_structlog_as_installed():
    # a program that embeds pykbroker (not one of its commands) gets structlog as installed, rich included
    pytest.importorskip("rich")
    code = "import pykbroker.utils.logging\nimport structlog.dev"
    assert run_probe(code, "app.py", "structlog.dev.rich is not None") is True


def test_main_gives_the_garbage_collector_back(capsys):
    # kafka.main() turns the collector off while the broker's modules are imported; every exit restores it
    import gc

    from pykbroker import kafka

    assert gc.isenabled()
    with pytest.raises(SystemExit):
        kafka.main(["--bogus"])  # the usage line, exit code 1
    assert gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(SystemExit):
            kafka.main(["--bogus"])
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert "USAGE" in capsys.readouterr().err
