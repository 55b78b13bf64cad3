"""Feature versions on real nodes (KIP-584 / KIP-778 / KIP-1022): ApiVersions' supported and finalized features,
UpdateFeatures (direct, forwarded by a broker, validate_only, Kafka's refusals), bin/kafka-features output,
kafka-storage format --release-version / --feature, a directory formatted before feature versions existed, and
transaction.version 1's effect on __transaction_state."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.meta_properties import random_uuid, write_meta_properties
from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import KRaftCluster
from tests.helpers.tools import run_tool
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.integration

SUPPORTED = {  # pykbroker's table: name -> (min, max)
    "eligible.leader.replicas.version": (0, 1),
    "group.version": (0, 1),
    "kraft.version": (0, 1),
    "metadata.version": (7, 25),
    "transaction.version": (0, 2),
}


def features(*args: str) -> subprocess.CompletedProcess:
    return run_tool("feature_command", *args)


def api_versions(bootstrap: str, version: int) -> dict:
    with BrokerConnection.to(bootstrap) as conn:
        return conn.request(
            ApiKeys.API_VERSIONS, version, {"client_software_name": "test", "client_software_version": "1"}
        )


def update(bootstrap: str, version: int, updates: list[dict], validate_only: bool = False) -> dict:
    with BrokerConnection.to(bootstrap) as conn:
        return conn.request(
            ApiKeys.UPDATE_FEATURES,
            version,
            {"timeout_ms": 30000, "feature_updates": updates, "validate_only": validate_only},
        )


def describe_lines(stdout: str) -> list[str]:
    """The describe output with every ``Epoch: N`` checked and replaced by ``Epoch: E``."""
    lines = stdout.strip().split("\n")
    assert all(re.search(r"\tEpoch: \d+$", line) for line in lines), stdout
    return [re.sub(r"Epoch: \d+$", "Epoch: E", line) for line in lines]


def expected_describe(finalized: dict[str, str]) -> list[str]:
    def text(name, level):
        if name != "metadata.version":
            return str(level)
        return {7: "3.3-IV3", 21: "3.9-IV0", 22: "4.0-IV0", 25: "4.0-IV3"}.get(level, level)

    return [
        f"Feature: {name}\tSupportedMinVersion: {text(name, lo)}\tSupportedMaxVersion: {text(name, hi)}\t"
        f"FinalizedVersionLevel: {finalized.get(name, '0')}\tEpoch: E"
        for name, (lo, hi) in sorted(SUPPORTED.items())
    ]


# -- a single node --------------------------------------------------------------------------------------------


def test_api_versions_carry_supported_and_finalized_features(broker):
    v4 = api_versions(broker.bootstrap, 4)
    supported = {f["name"]: (f["min_version"], f["max_version"]) for f in v4["supported_features"]}
    assert supported == SUPPORTED
    finalized = {f["name"]: (f["min_version_level"], f["max_version_level"]) for f in v4["finalized_features"]}
    # a new cluster: Kafka 4.0's metadata.version and its defaults that pykbroker supports
    assert finalized == {"metadata.version": (25, 25), "transaction.version": (2, 2), "group.version": (1, 1)}
    assert v4["finalized_features_epoch"] >= 0
    # below v4 the features whose minimum is 0 are left out (KAFKA-17492); the finalized ones are all there
    v3 = api_versions(broker.bootstrap, 3)
    assert [f["name"] for f in v3["supported_features"]] == ["metadata.version"]
    assert v3["finalized_features"] == v4["finalized_features"]
    assert v3["finalized_features_epoch"] == v4["finalized_features_epoch"]


def test_kafka_features_describe_upgrade_downgrade_and_refusals(broker):
    b = broker.bootstrap
    run = features("--bootstrap-server", b, "describe")
    assert run.returncode == 0, run.stderr
    assert describe_lines(run.stdout) == expected_describe(
        {"metadata.version": "4.0-IV3", "transaction.version": "2", "group.version": "1"}
    )
    epoch = int(run.stdout.split("Epoch: ")[1].split("\n")[0])

    # above the supported range: Kafka's error, nothing changes
    run = features("--bootstrap-server", b, "upgrade", "--feature", "transaction.version=3")
    assert run.returncode == 1
    assert run.stdout.strip() == (
        "Could not upgrade transaction.version to 3. The update failed for all features since the following "
        "feature had an error: Invalid update version 3 for feature transaction.version. Local controller 1 only "
        "supports versions 0-2"
    )
    assert run.stderr.strip() == "1 out of 1 operation(s) failed."
    # a downgrade needs a downgrade type
    raw = update(b, 2, [{"feature": "transaction.version", "max_version_level": 0, "upgrade_type": 1}])
    assert raw["error_code"] == errors.INVALID_UPDATE_VERSION
    assert raw["error_message"].endswith(
        "Invalid update version 0 for feature transaction.version. Can't downgrade the version of this feature "
        "without setting the upgrade type to either safe or unsafe downgrade."
    )
    # validate_only (--dry-run) changes nothing
    run = features("--bootstrap-server", b, "downgrade", "--feature", "transaction.version=0", "--dry-run")
    assert (run.returncode, run.stdout.strip()) == (0, "transaction.version can be downgraded to 0."), run.stderr
    assert {f["name"]: f["max_version_level"] for f in api_versions(b, 4)["finalized_features"]} == {
        "metadata.version": 25,
        "transaction.version": 2,
        "group.version": 1,
    }

    run = features("--bootstrap-server", b, "downgrade", "--feature", "transaction.version=0")
    assert (run.returncode, run.stdout.strip()) == (0, "transaction.version was downgraded to 0."), run.stderr
    run = features("--bootstrap-server", b, "describe")
    assert describe_lines(run.stdout) == expected_describe({"metadata.version": "4.0-IV3", "group.version": "1"})
    assert int(run.stdout.split("Epoch: ")[1].split("\n")[0]) > epoch

    # UpdateFeatures v1 answers per feature; upgrade back
    raw = update(b, 1, [{"feature": "transaction.version", "max_version_level": 2, "upgrade_type": 1}])
    assert raw["error_code"] == errors.NONE
    assert raw["results"] == [{"feature": "transaction.version", "error_code": 0, "error_message": None}]
    wait_until(lambda: {f["name"] for f in api_versions(b, 4)["finalized_features"]} >= {"transaction.version"}, 10)

    # metadata.version: a downgrade across 4.0-IV1 (metadata changed) is refused, safe or not; one within is not
    run = features("--bootstrap-server", b, "downgrade", "--release-version", "3.9")
    assert run.returncode == 1
    assert "Could not downgrade metadata.version to 21. The update failed for all features since the following " \
        "feature had an error: Invalid metadata.version 21. Refusing to perform the requested downgrade because " \
        "it might delete metadata information." in run.stdout  # fmt: skip
    run = features("--bootstrap-server", b, "downgrade", "--unsafe", "--metadata", "3.9-IV0")
    assert run.stdout.strip().endswith(
        "Invalid metadata.version 21. Unsafe metadata downgrade is not supported in this version."
    )
    run = features("--bootstrap-server", b, "disable", "--feature", "metadata.version")
    assert run.returncode == 1 and run.stdout.strip().endswith(
        "Invalid update version 0 for feature metadata.version. Local controller 1 only supports versions 7-25"
    )
    run = features("--bootstrap-server", b, "downgrade", "--feature", "metadata.version=23")
    assert (run.returncode, run.stdout.strip()) == (0, "metadata.version was downgraded to 23."), run.stderr
    run = features("--bootstrap-server", b, "upgrade", "--metadata", "4.0")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:2] == [
        " `metadata` flag is deprecated and may be removed in a future release.",
        "metadata.version was upgraded to 25.",
    ]
    # kraft.version 1 on a static quorum: refused as Kafka 4.1 does while its voters have not reported their directory
    # ids and supported ranges (KIP-853)
    run = features("--bootstrap-server", b, "upgrade", "--feature", "kraft.version=1")
    assert run.returncode == 1
    assert run.stdout.strip() == (
        "Could not upgrade kraft.version to 1. The update failed for all features since the following feature had "
        "an error: Invalid upgrade of kraft.version to 1 because not all of the voters support it"
    )
    run = features("--bootstrap-server", b, "upgrade", "--feature", "kraft.version=0")
    assert (run.returncode, run.stdout.strip()) == (0, "kraft.version was upgraded to 0."), run.stdout + run.stderr
    # a level beyond what pykbroker implements: refused by the controller
    run = features("--bootstrap-server", b, "upgrade", "--feature", "eligible.leader.replicas.version=2")
    assert run.stdout.strip().endswith(
        "Invalid update version 2 for feature eligible.leader.replicas.version. Local controller 1 only supports "
        "versions 0-1"
    ), run.stdout + run.stderr


def test_update_features_needs_alter_on_the_cluster(broker_factory):
    broker = broker_factory(
        authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        allow_everyone_if_no_acl_found="false",
    )
    raw = update(broker.bootstrap, 2, [{"feature": "transaction.version", "max_version_level": 0, "upgrade_type": 2}])
    assert raw["error_code"] == errors.CLUSTER_AUTHORIZATION_FAILED


def test_clients_still_work_with_features_in_api_versions(broker):
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("feat-clients", b"v")
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["feat-clients"])
        msg = None
        for _ in range(30):
            msg = consumer.poll(1)
            if msg is not None and not msg.error():
                break
        assert msg is not None and msg.value() == b"v"
    finally:
        consumer.close()
    kcat = shutil.which("kcat")
    assert kcat, "kcat must be installed (bin/run-tests and .ci/run install it)"
    out = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-C", "-t", "feat-clients", "-o", "beginning", "-c", "1", "-e"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "v", out.stderr


def test_transaction_version_chooses_the_transaction_log_value_version(broker):
    """transaction.version 1 or 2 (a new cluster's) writes TransactionLogValue v1, 0 writes v0 (as Kafka)."""
    from confluent_kafka import Producer

    def transaction(tid: str) -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
        p.init_transactions(15)
        p.begin_transaction()
        p.produce("feat-txn", b"x")
        p.commit_transaction(15)

    transaction("tv1")
    run = features("--bootstrap-server", broker.bootstrap, "downgrade", "--feature", "transaction.version=0")
    assert run.returncode == 0, run.stderr
    wait_until(lambda: len(api_versions(broker.bootstrap, 4)["finalized_features"]) == 2, 10)
    transaction("tv0")
    broker.stop()
    versions = transaction_log_value_versions(Path(broker.props["log.dirs"]))
    assert set(versions["tv1"]) == {1} and set(versions["tv0"]) == {0}, versions


def transaction_log_value_versions(log_dir: Path) -> dict[str, list[int]]:
    """transactional id -> the versions of its __transaction_state values, from the segment files."""
    from pykbroker.coordinator.transaction.transaction_log import decode_key
    from pykbroker.record.default_record_batch import iter_batches

    found: dict[str, list[int]] = {}
    for segment in sorted(log_dir.glob("__transaction_state-*/*.log")):
        for _, batch in iter_batches(memoryview(segment.read_bytes())):
            if batch.is_control_batch:
                continue
            for record in batch.records():
                if record.key is not None and record.value is not None:
                    found.setdefault(decode_key(record.key), []).append(int.from_bytes(record.value[:2], "big"))
    return found


# -- formatting -----------------------------------------------------------------------------------------------


def test_directory_formatted_before_feature_versions_starts_at_the_old_levels(tmp_path):
    """meta.properties alone (what kafka-storage format and the single-node auto-format wrote before):
    metadata.version 4.0-IV0 and nothing else finalized, as before; a restart keeps them."""
    node = BrokerProcess(tmp_path / "old")
    node.write_config()
    cluster_id = random_uuid()
    write_meta_properties(node.props["log.dirs"], cluster_id, 1)
    node.start()
    try:
        run = features("--bootstrap-server", node.bootstrap, "describe")
        assert run.returncode == 0, run.stderr
        assert describe_lines(run.stdout) == expected_describe({"metadata.version": "4.0-IV0"})
        node.restart()
        run = features("--bootstrap-server", node.bootstrap, "describe")
        assert describe_lines(run.stdout) == expected_describe({"metadata.version": "4.0-IV0"})
    finally:
        node.stop()


def test_storage_format_release_version_and_feature_then_forwarded_upgrade(tmp_path):
    """A controller and a broker formatted with --release-version 3.9 --feature transaction.version=1: the
    controller finalizes those levels; UpdateFeatures sent to the broker is forwarded to the controller."""
    cluster = KRaftCluster(tmp_path, controllers=1, brokers=1)
    for node in cluster.nodes:
        node.write_config()
        run = run_tool(
            "storage_tool", "format", "-t", cluster.cluster_id, "-c", str(node.config_path),
            "--release-version", "3.9", "--feature", "transaction.version=1",
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert "with metadata.version 3.9-IV0." in run.stdout
    KRaftCluster.start_nodes(cluster.nodes)
    try:
        broker = cluster.brokers[101].bootstrap
        run = features("--bootstrap-server", broker, "describe")
        assert describe_lines(run.stdout) == expected_describe(
            {"metadata.version": "3.9-IV0", "transaction.version": "1"}
        )
        run = features("--bootstrap-controller", cluster.controller_address(1), "describe")
        assert describe_lines(run.stdout) == expected_describe(
            {"metadata.version": "3.9-IV0", "transaction.version": "1"}
        )
        # forwarded by the broker: validate_only, then the upgrade
        raw = update(broker, 2, [{"feature": "metadata.version", "max_version_level": 25, "upgrade_type": 1}], True)
        assert raw["error_code"] == errors.NONE, raw
        assert {f["name"]: f["max_version_level"] for f in api_versions(broker, 4)["finalized_features"]}[
            "metadata.version"
        ] == 21
        run = features("--bootstrap-server", broker, "upgrade", "--metadata", "4.0-IV3")
        assert run.returncode == 0 and "metadata.version was upgraded to 25." in run.stdout, run.stderr
        wait_until(
            lambda: "FinalizedVersionLevel: 4.0-IV3" in features("--bootstrap-server", broker, "describe").stdout, 10
        )
        # --bootstrap-controller: sent to the active controller
        run = features(
            "--bootstrap-controller", cluster.controller_address(1), "upgrade", "--feature", "transaction.version=1",
            "--dry-run",
        )  # fmt: skip
        assert (run.returncode, run.stdout.strip()) == (0, "transaction.version can be upgraded to 1."), run.stderr
        # refused by the controller, answered through the broker
        raw = update(broker, 2, [{"feature": "transaction.version", "max_version_level": 3, "upgrade_type": 1}])
        assert raw["error_code"] == errors.INVALID_UPDATE_VERSION
        assert raw["error_message"].endswith("Local controller 1 only supports versions 0-2")
    finally:
        cluster.stop()


def test_storage_format_refusals(tmp_path):
    node = BrokerProcess(tmp_path / "n")
    node.write_config()
    cid = random_uuid()

    def fmt(*args):
        return run_tool("storage_tool", "format", "-t", cid, "-c", str(node.config_path), *args)

    run = fmt("--feature", "transaction.version=3")
    assert (run.returncode, run.stderr.strip()) == (1, "No feature:transaction.version with feature level 3")
    run = fmt("--feature", "foo.bar=1")
    assert run.stderr.strip() == (
        "Unsupported feature: foo.bar. Supported features are: eligible.leader.replicas.version, group.version, "
        "kraft.version, transaction.version"
    )
    run = fmt("--release-version", "4.0", "--feature", "metadata.version=22")
    assert run.stderr.strip() == "Use --release-version instead of --feature metadata.version=X to avoid ambiguity."
    run = fmt("--release-version", "3.4", "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert run.stderr.strip() == "SCRAM is only supported in metadata.version 3.5-IV2 or later."
    run = fmt("--release-version", "2.8")
    assert run.returncode == 1 and run.stderr.strip() == "Version 2.8 is not a valid version"
    assert not any(Path(node.props["log.dirs"]).glob("meta.properties"))
