"""bin/kafka-storage format / random-uuid, then the broker starts on the formatted directories."""

import subprocess
import sys

import pytest

from tests.helpers.broker import ROOT, BrokerProcess

pytestmark = pytest.mark.integration


def storage(*args):
    return subprocess.run(
        [sys.executable, "-m", "pykbroker.tools.storage_tool", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_random_uuid_format_and_start(tmp_path):
    r = storage("random-uuid")
    assert r.returncode == 0
    cluster_id = r.stdout.strip()
    assert len(cluster_id) == 22
    b = BrokerProcess(tmp_path / "b")
    b.write_config()
    r = storage("format", "-t", cluster_id, "-c", str(b.config_path))
    assert r.returncode == 0, r.stderr
    assert f"cluster.id={cluster_id}" in (tmp_path / "b" / "logs" / "meta.properties").read_text()
    again = storage("format", "-t", cluster_id, "-c", str(b.config_path))
    assert again.returncode == 1 and "is already formatted" in again.stderr
    assert storage("format", "-t", cluster_id, "-c", str(b.config_path), "--ignore-formatted").returncode == 0
    assert storage("format", "-t", "not-a-uuid", "-c", str(b.config_path)).returncode == 1
    b.start()
    try:
        from confluent_kafka.admin import AdminClient

        assert AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).cluster_id == cluster_id
    finally:
        b.stop()
