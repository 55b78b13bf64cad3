"""Feature versions: Kafka 4.0's tables, FeatureControlManager.update_features (Kafka's checks and messages),
registration against finalized levels, records gated by metadata.version."""

import uuid

import pytest

from pykbroker.metadata import features as fv
from pykbroker.metadata.cluster_control_manager import ClusterControlManager
from pykbroker.metadata.delta import MetadataDelta
from pykbroker.metadata.feature_control_manager import FeatureControlManager, feature_level_bootstrap_records
from pykbroker.metadata.image import MetadataImage
from pykbroker.metadata.scram_control_manager import ScramControlManager
from pykbroker.protocol import errors
from pykbroker.tools import feature_command

PREFIX = "The update failed for all features since the following feature had an error: "


# -- the table --------------------------------------------------------------------------------------------------


def test_release_versions_and_metadata_changes():
    assert fv.parse_release_version("4.0") == 25 and fv.parse_release_version("4.0-IV1") == 23
    assert fv.parse_release_version("3.9.1") == 21 and fv.parse_release_version("3.3") == 7
    for bad in ("2.8", "3.3-IV2", "4.1", "x"):
        with pytest.raises(ValueError, match=f"Version {bad} is not a valid version"):
            fv.parse_release_version(bad)
    # Kafka's checkIfMetadataChanged: a level above the lower one, up to the higher, changed the metadata
    assert not fv.did_metadata_change(25, 23) and fv.did_metadata_change(25, 22) and fv.did_metadata_change(22, 25)
    assert not fv.did_metadata_change(22, 17) and fv.did_metadata_change(22, 16)
    assert fv.level_to_string("metadata.version", 25) == "4.0-IV3"
    assert fv.level_to_string("metadata.version", 0) == "UNKNOWN 0"
    assert fv.level_to_string("transaction.version", 1) == "1"


def test_version_mapping_and_dependencies_print_kafkas_tables():
    assert feature_command.version_mapping_lines("4.0") == [
        "metadata.version=25 (4.0)",
        "kraft.version=1",
        "transaction.version=2",
        "group.version=1",
        "eligible.leader.replicas.version=0",
    ]
    assert feature_command.version_mapping_lines("3.8-IV0") == [
        "metadata.version=20 (3.8-IV0)",
        "kraft.version=0",
        "transaction.version=0",
        "group.version=0",
        "eligible.leader.replicas.version=0",
    ]
    assert feature_command.version_mapping_lines(None)[0] == "metadata.version=25 (4.0-IV3)"
    with pytest.raises(feature_command.TerseError, match="Supported versions are: 3.3-IV3 to 4.0-IV3"):
        feature_command.version_mapping_lines("5.0")
    assert feature_command.feature_dependencies_lines(
        ["eligible.leader.replicas.version=1", "kraft.version=1", "metadata.version=21", "group.version=1"]
    ) == [
        "eligible.leader.replicas.version=1 requires:",
        "    metadata.version=23 (4.0-IV1)",
        "kraft.version=1 requires:",
        "    metadata.version=21 (3.9-IV0)",
        "metadata.version=21 (3.9-IV0) has no dependencies.",
        "group.version=1 has no dependencies.",
    ]
    with pytest.raises(feature_command.TerseError, match="No feature:group.version with feature level 2"):
        feature_command.feature_dependencies_lines(["group.version=2"])
    with pytest.raises(feature_command.TerseError, match="Unknown feature: foo"):
        feature_command.feature_dependencies_lines(["foo=1"])


def test_new_clusters_start_at_kafkas_defaults_capped_to_the_supported():
    assert fv.bootstrap_levels(25) == {
        "metadata.version": 25,
        "kraft.version": 0,
        "transaction.version": 2,
        "group.version": 1,
        "eligible.leader.replicas.version": 0,
    }
    records = feature_level_bootstrap_records(25, fv.bootstrap_levels(25))
    assert [(r.data["name"], r.data["feature_level"]) for r in records] == [
        ("metadata.version", 25),
        ("group.version", 1),
        ("transaction.version", 2),
    ]


# -- UpdateFeatures -----------------------------------------------------------------------------------------------


def manager(levels=None, brokers=()):
    m = FeatureControlManager(1, lambda: brokers)
    for r in feature_level_bootstrap_records(25, levels if levels is not None else fv.bootstrap_levels(25)):
        m.replay(r)
    return m


def refusal(result) -> str:
    assert result.records == [] and result.response["error_code"] == errors.INVALID_UPDATE_VERSION
    assert result.response["error_message"].startswith(PREFIX)
    return result.response["error_message"][len(PREFIX) :]


def test_upgrade_downgrade_and_validate_only():
    m = manager()
    down = m.update_features({"transaction.version": 0}, {"transaction.version": 2}, False)
    assert down.response == {"error_code": 0, "error_message": None}
    assert [(r.data["name"], r.data["feature_level"]) for r in down.records] == [("transaction.version", 0)]
    only = m.update_features({"transaction.version": 0}, {"transaction.version": 2}, True)
    assert only.response["error_code"] == 0 and only.records == []
    for r in down.records:
        m.replay(r)
    assert m.finalized == {"metadata.version": 25, "group.version": 1}
    assert refusal(m.update_features({"transaction.version": 0}, {"transaction.version": 4}, False)) == (
        "Invalid update version 0 for feature transaction.version. The controller does not support the given "
        "upgrade type."
    )
    assert refusal(m.update_features({"transaction.version": 1}, {"transaction.version": 2}, False)) == (
        "Invalid update version 1 for feature transaction.version. Can't downgrade to a newer version."
    )
    assert refusal(m.update_features({"transaction.version": -1}, {}, False)) == (
        "Invalid update version -1 for feature transaction.version. A feature version cannot be less than 0."
    )


def test_refused_outside_the_ranges_of_this_controller_and_of_every_broker():
    m = manager()
    assert refusal(m.update_features({"transaction.version": 3}, {}, False)) == (
        "Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2"
    )
    assert refusal(m.update_features({"group.version": 2}, {}, False)) == (
        "Invalid update version 2 for feature group.version. Local controller 1 only supports versions 0-1"
    )
    assert refusal(m.update_features({"eligible.leader.replicas.version": 2}, {}, False)) == (
        "Invalid update version 2 for feature eligible.leader.replicas.version. Local controller 1 only supports "
        "versions 0-1"
    )
    brokers = [(5, {"transaction.version": (0, 1)}), (6, {"metadata.version": (7, 25)})]
    m = manager({"metadata.version": 25}, brokers)
    assert refusal(m.update_features({"transaction.version": 1}, {}, False)) == (
        "Invalid update version 1 for feature transaction.version. Broker 6 does not support this feature."
    )
    m = manager({"metadata.version": 25}, [(5, {"metadata.version": (7, 22)})])
    assert refusal(m.update_features({"metadata.version": 24}, {}, False)) == (
        "Invalid update version 24 for feature metadata.version. Broker 5 only supports versions 7-22"
    )
    # all or nothing: one bad update fails the others
    m = manager({"metadata.version": 22})
    both = m.update_features({"metadata.version": 25, "transaction.version": 3}, {}, False)
    assert refusal(both).startswith("Invalid update version 3 for feature transaction.version.")
    # an unknown feature can only be "set" to 0, and then Kafka's Feature lookup fails
    assert refusal(m.update_features({"foo.bar": 0}, {}, False)) == (
        "Invalid update version 0 for feature foo.bar. Feature foo.bar not found."
    )


def test_metadata_version_downgrades():
    m = manager()
    assert refusal(m.update_features({"metadata.version": 22}, {"metadata.version": 1}, False)) == (
        "Invalid update version 22 for feature metadata.version. Can't downgrade the version of this feature "
        "without setting the upgrade type to either safe or unsafe downgrade."
    )
    assert refusal(m.update_features({"metadata.version": 22}, {"metadata.version": 2}, False)) == (
        "Invalid metadata.version 22. Refusing to perform the requested downgrade because it might delete "
        "metadata information."
    )
    assert refusal(m.update_features({"metadata.version": 22}, {"metadata.version": 3}, False)) == (
        "Invalid metadata.version 22. Unsafe metadata downgrade is not supported in this version."
    )
    safe = m.update_features({"metadata.version": 23}, {"metadata.version": 2}, False)
    assert safe.response["error_code"] == 0 and safe.records[0].data == {
        "name": "metadata.version",
        "feature_level": 23,
    }
    assert refusal(m.update_features({"metadata.version": 0}, {"metadata.version": 2}, False)) == (
        "Invalid update version 0 for feature metadata.version. Local controller 1 only supports versions 7-25"
    )


def test_kraft_version_is_never_a_feature_level_record():
    m = manager()
    m.replay(feature_level_bootstrap_records(25, {})[0]._replace(data={"name": "kraft.version", "feature_level": 1}))
    assert "kraft.version" not in m.finalized
    ok = m.update_features({"kraft.version": 0}, {}, False)
    assert ok.response["error_code"] == 0 and ok.records == []


def test_kraft_version_is_the_raft_logs_and_a_static_quorum_is_not_upgraded():
    """kraft.version's current level is the Raft log's (KIP-853): a static quorum (0) refuses the upgrade to 1 with
    Kafka 4.1's error; a dynamic one (1) takes 1 as a no-op and refuses a downgrade."""
    static = manager()
    assert refusal(static.update_features({"kraft.version": 1}, {}, False)) == (
        "Invalid upgrade of kraft.version to 1 because not all of the voters support it"
    )
    assert refusal(static.update_features({"kraft.version": 1}, {}, True)).endswith("not all of the voters support it")
    assert refusal(static.update_features({"kraft.version": 2}, {}, False)) == (
        "Invalid update version 2 for feature kraft.version. Local controller 1 only supports versions 0-1"
    )
    dynamic = FeatureControlManager(1, lambda: (), kraft_version=lambda: 1)
    for r in feature_level_bootstrap_records(25, fv.bootstrap_levels(25)):
        dynamic.replay(r)
    same = dynamic.update_features({"kraft.version": 1}, {}, False)
    assert same.response["error_code"] == errors.NONE and same.records == []
    assert refusal(dynamic.update_features({"kraft.version": 0}, {"kraft.version": 2}, False)) == (
        "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature."
    )


# -- registration and records gated by metadata.version -----------------------------------------------------------


def register(cluster, features):
    request = {"broker_id": 1, "cluster_id": "c", "incarnation_id": uuid.uuid4(), "features": features}
    return cluster.register_broker(request, 10)


def test_a_broker_missing_a_finalized_level_is_refused():
    finalized = {"metadata.version": 25, "transaction.version": 1}
    cluster = ClusterControlManager("c", metadata_version=lambda: 25, finalized_features=lambda: finalized)
    ok = register(cluster, fv.supported_features_request())
    assert ok.response["error_code"] == errors.NONE and ok.records[0].version == 3
    old = register(cluster, [{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 22}])
    assert old.records == [] and old.response == {
        "error_code": errors.UNSUPPORTED_VERSION,
        "error_message": "Unable to register because the broker does not support finalized version 25 of "
        "metadata.version. The broker wants a version between 7 and 22, inclusive.",
        "broker_epoch": -1,
    }
    no_tv = register(cluster, [{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 25}])
    assert no_tv.response["error_message"] == (
        "Unable to register because the broker does not support finalized version 1 of transaction.version. "
        "The broker wants a version between 0 and 0, inclusive."
    )
    # a registration naming no metadata.version range supports only the minimum (3.3-IV3)
    assert register(cluster, []).response["error_code"] == errors.UNSUPPORTED_VERSION


@pytest.mark.parametrize(("mv", "version"), [(7, 1), (8, 2), (16, 2), (17, 3), (25, 3)])
def test_register_broker_record_version_follows_metadata_version(mv, version):
    cluster = ClusterControlManager(
        "c", metadata_version=lambda: mv, finalized_features=lambda: {"metadata.version": mv}
    )
    result = register(cluster, fv.supported_features_request())
    assert result.records[0].version == version
    image = MetadataDelta(MetadataImage()).replay_all(feature_level_bootstrap_records(mv, {}) + result.records).apply()
    assert [r.version for r in image.to_records() if r.name == "RegisterBrokerRecord"] == [version]


def test_scram_needs_metadata_version_3_5_iv2():
    upsert = {"name": "alice", "mechanism": 1, "iterations": 8192, "salt": b"s", "salted_password": b"p"}
    old = ScramControlManager(lambda: 10).alter_credentials({"deletions": [], "upsertions": [upsert]})
    assert old.records == [] and old.response["results"][0]["error_code"] == errors.UNSUPPORTED_VERSION
    assert old.response["results"][0]["error_message"] == "The current metadata.version does not support SCRAM"
    new = ScramControlManager(lambda: 11).alter_credentials({"deletions": [], "upsertions": [upsert]})
    assert new.response["results"][0]["error_code"] == errors.NONE and len(new.records) == 1
