"""kafka-features: describe and change the cluster's feature versions (``org.apache.kafka.tools.FeatureCommand``,
KIP-584 / KIP-778 / KIP-1022).

    bin/kafka-features (--bootstrap-server HOST:PORT | --bootstrap-controller HOST:PORT) [--command-config FILE]
        describe
        upgrade   (--release-version V | [--metadata V] [--feature NAME=LEVEL ...]) [--dry-run]
        downgrade (--release-version V | [--metadata V] [--feature NAME=LEVEL ...]) [--unsafe] [--dry-run]
        disable   --feature NAME ... [--unsafe] [--dry-run]
        version-mapping [--release-version V]
        feature-dependencies --feature NAME=LEVEL ...

``describe`` prints, per feature the node supports (ApiVersions v4, as Kafka's ``Admin.describeFeatures``), one
line of tab-separated fields (``-`` for an unknown epoch)::

    Feature: metadata.version<TAB>SupportedMinVersion: 3.3-IV3<TAB>SupportedMaxVersion: 4.0-IV3<TAB>
    FinalizedVersionLevel: 4.0-IV3<TAB>Epoch: 5

``upgrade``/``downgrade``/``disable`` send one UpdateFeatures (v2; upgrade type 1 upgrade, 2 safe downgrade, 3
``--unsafe`` downgrade; ``--dry-run``: ``validate_only``) to the node (``--bootstrap-server``: a broker, which
forwards it) or to the active controller (``--bootstrap-controller``), then print one line per feature (``X was
upgraded to N.``, ``X can be upgraded to N.``, ``Could not upgrade X to N. <error>``) and, when some failed,
``K out of M operation(s) failed.`` on stderr with exit status 1. ``--release-version`` sets ``metadata.version``
and every feature to Kafka's default for that release (``version-mapping`` prints them; features Kafka would
leave at 0 are not sent by ``upgrade``). ``version-mapping`` and ``feature-dependencies`` print Kafka 4.0's
tables (:mod:`pykbroker.metadata.features`) without connecting. Errors print one line, exit 1.
``--command-config`` must exist; its client settings are read but plaintext connections are used.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.config.properties import load_properties
from pykbroker.metadata import features as fv
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.tools.command_line_utils import ToolArgumentParser, configure_tool_logging, error_line
from pykbroker.tools.metadata_quorum_command import active_controller_address

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
API_VERSIONS_VERSION = 4
UPDATE_FEATURES_VERSION = 2
#: Kafka's default.api.timeout.ms, the UpdateFeatures timeout of Kafka's admin client
TIMEOUT_MS = 60000


class TerseError(Exception):
    """Kafka's TerseException (or a RuntimeException the tool prints): the message alone, exit status 1."""


def exception_message(code: int, message: str | None) -> str:
    """The message of the exception Kafka's client raises for an error code: the server's, else the default."""
    return message if message else errors.for_code(code).default_message


# -- describe ------------------------------------------------------------------------------------------------


def describe_lines(response: dict) -> list[str]:
    """Kafka's ``FeatureCommand.handleDescribe`` over an ApiVersions response."""
    finalized = {f["name"]: f["max_version_level"] for f in response.get("finalized_features") or []}
    epoch = response.get("finalized_features_epoch", -1)
    lines = []
    for f in sorted(response.get("supported_features") or [], key=lambda f: f["name"]):
        name = f["name"]
        lines.append(
            f"Feature: {name}\tSupportedMinVersion: {fv.level_to_string(name, f['min_version'])}\t"
            f"SupportedMaxVersion: {fv.level_to_string(name, f['max_version'])}\t"
            f"FinalizedVersionLevel: {fv.level_to_string(name, finalized.get(name, 0))}\t"
            f"Epoch: {epoch if epoch >= 0 else '-'}"
        )
    return lines


def describe(conn: BrokerConnection) -> list[str]:
    response = conn.request(
        ApiKeys.API_VERSIONS,
        API_VERSIONS_VERSION,
        {"client_software_name": "pykbroker-tools", "client_software_version": "1"},
    )
    if response["error_code"] != errors.NONE:
        raise TerseError(exception_message(response["error_code"], None))
    return describe_lines(response)


# -- upgrade, downgrade, disable -----------------------------------------------------------------------------


def parse_name_and_level(text: str) -> tuple[str, int]:
    """Kafka's ``FeatureCommand.parseNameAndLevel``."""
    name, eq, level = text.partition("=")
    if not eq:
        raise TerseError(f"Can't parse feature=level string {text}: equals sign not found.")
    name, level = name.strip(), level.strip()
    try:
        value = int(level)
        if not -32768 <= value <= 32767:
            raise ValueError
    except ValueError:
        raise TerseError(f"Can't parse feature=level string {text}: unable to parse {level} as a short.") from None
    return name, value


def _unknown_metadata_version(text: str) -> TerseError:
    return TerseError(
        f"Unknown metadata.version {text}. Supported metadata.version are {fv.metadata_versions_string()}"
    )


def updates_for(args: Any, upgrade_type: int, out) -> dict[str, tuple[int, int]]:
    """Kafka's ``handleUpgradeOrDowngrade``: feature -> (level, upgrade type)."""
    metadata, features, release = args.metadata, args.feature, args.release_version
    if release is not None and (metadata is not None or features is not None):
        raise TerseError("Can not specify `release-version` with other feature flags.")
    updates: dict[str, tuple[int, int]] = {}
    if release is not None:
        try:
            level = fv.parse_release_version(release)
        except ValueError:
            raise _unknown_metadata_version(release) from None
        updates[fv.METADATA_VERSION] = (level, upgrade_type)
        for f in fv.FEATURES:
            default = fv.default_level(f.name, level)
            if upgrade_type != UPGRADE or default > 0:  # no request to upgrade a feature to 0
                updates[f.name] = (default, upgrade_type)
        return updates
    if metadata is not None:
        print(" `metadata` flag is deprecated and may be removed in a future release.", file=out)
        try:
            updates[fv.METADATA_VERSION] = (fv.parse_release_version(metadata), upgrade_type)
        except ValueError:
            raise _unknown_metadata_version(metadata) from None
    for text in features or []:
        name, level = parse_name_and_level(text)
        if name in updates:
            raise TerseError(f"Feature {name} was specified more than once.")
        updates[name] = (level, upgrade_type)
    return updates


def disable_updates(args: Any, upgrade_type: int) -> dict[str, tuple[int, int]]:
    updates: dict[str, tuple[int, int]] = {}
    for name in args.feature or []:
        if name in updates:
            raise TerseError(f"Feature {name} was specified more than once.")
        updates[name] = (0, upgrade_type)
    return updates


def update_features(conn: BrokerConnection, updates: dict[str, tuple[int, int]], dry_run: bool) -> dict:
    body = {
        "timeout_ms": TIMEOUT_MS,
        "feature_updates": [
            {"feature": name, "max_version_level": level, "upgrade_type": upgrade_type}
            for name, (level, upgrade_type) in updates.items()
        ],
        "validate_only": dry_run,
    }
    return conn.request(ApiKeys.UPDATE_FEATURES, UPDATE_FEATURES_VERSION, body)


def result_lines(op: str, updates: dict[str, tuple[int, int]], response: dict, dry_run: bool) -> tuple[list[str], int]:
    """Kafka's ``FeatureCommand.update`` output: one line per feature (by name) and the number that failed. A
    top-level error fails every feature with its message, as Kafka's admin client does."""
    per_feature = {r["feature"]: r for r in response.get("results") or []}
    lines, failures = [], 0
    for name in sorted(updates):
        level = updates[name][0]
        code, message = response["error_code"], response.get("error_message")
        if code == errors.NONE and name in per_feature:
            code, message = per_feature[name]["error_code"], per_feature[name].get("error_message")
        if code != errors.NONE:
            what = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
            lines.append(f"{'Can not' if dry_run else 'Could not'} {what}. {exception_message(code, message)}")
            failures += 1
        else:
            done = "disabled." if op == "disable" else f"{op}d to {level}."
            lines.append(f"{name}{' can be ' if dry_run else ' was '}{done}")
    return lines, failures


# -- version-mapping, feature-dependencies ---------------------------------------------------------------------


def version_mapping_lines(release: str | None) -> list[str]:
    """Kafka's ``FeatureCommand.handleVersionMapping``."""
    release = release if release is not None else fv.metadata_version(fv.LATEST_PRODUCTION).version
    try:
        level = fv.parse_release_version(release)
    except ValueError:
        raise TerseError(
            f"Unknown release version '{release}'. Supported versions are: "
            f"{fv.metadata_version(fv.MINIMUM_VERSION).version} to {fv.metadata_version(fv.LATEST_PRODUCTION).version}"
        ) from None
    return [f"metadata.version={level} ({release})"] + [
        f"{f.name}={fv.default_level(f.name, level)}" for f in fv.FEATURES
    ]


def feature_dependencies_lines(specs: list[str]) -> list[str]:
    """Kafka's ``FeatureCommand.handleFeatureDependencies``."""
    lines: list[str] = []
    for spec in specs:
        name, level = parse_name_and_level(spec)
        if name == fv.METADATA_VERSION:
            try:
                mv = fv.metadata_version(level)
            except ValueError:
                raise TerseError(f"Unknown metadata.version {level}") from None
            lines.append(f"{name}={level} ({mv.version}) has no dependencies.")
            continue
        try:
            fv.feature(name)
        except ValueError:
            raise TerseError(f"Unknown feature: {name}") from None
        try:
            dependencies = fv.feature_version(name, level).dependencies
        except ValueError as e:
            raise TerseError(str(e)) from None
        if not dependencies:
            lines.append(f"{name}={level} has no dependencies.")
            continue
        lines.append(f"{name}={level} requires:")
        for dep, dep_level in dependencies.items():
            if dep == fv.METADATA_VERSION:
                lines.append(f"    {dep}={dep_level} ({fv.metadata_version(dep_level).version})")
            else:
                lines.append(f"    {dep}={dep_level}")
    return lines


# -- the command ---------------------------------------------------------------------------------------------


def execute(args: Any, out) -> None:
    if args.command_config is not None:
        if not os.path.exists(args.command_config):
            raise TerseError(f"Properties file {args.command_config} does not exists!")
        load_properties(args.command_config)
    command = args.command
    if command == "version-mapping":
        print("\n".join(version_mapping_lines(args.release_version)), file=out)
        return
    if command == "feature-dependencies":
        print("\n".join(feature_dependencies_lines(args.feature)), file=out)
        return
    controller = args.bootstrap_controller is not None
    bootstrap = args.bootstrap_controller if controller else args.bootstrap_server
    if command == "describe":
        with BrokerConnection.to(bootstrap, client_id="kafka-features") as conn:
            lines = describe(conn)
        if lines:
            print("\n".join(lines), file=out)
        return
    unsafe = bool(getattr(args, "unsafe", False))
    if command == "upgrade":
        updates = updates_for(args, UPGRADE, out)
    elif command == "downgrade":
        updates = updates_for(args, UNSAFE_DOWNGRADE if unsafe else SAFE_DOWNGRADE, out)
    else:
        updates = disable_updates(args, UNSAFE_DOWNGRADE if unsafe else SAFE_DOWNGRADE)
    if not updates:
        raise TerseError(f"You must specify at least one feature to {command}")
    if controller:  # Kafka's admin client sends controller-bound requests to the active controller
        with BrokerConnection.to(bootstrap, client_id="kafka-features") as conn:
            bootstrap = active_controller_address(conn) or bootstrap
    with BrokerConnection.to(bootstrap, client_id="kafka-features", timeout=TIMEOUT_MS / 1000 + 5) as conn:
        response = update_features(conn, updates, args.dry_run)
    lines, failures = result_lines(command, updates, response, args.dry_run)
    print("\n".join(lines), file=out)
    if failures:
        raise TerseError(f"{failures} out of {len(updates)} operation(s) failed.")


def _parser() -> ToolArgumentParser:
    parser = ToolArgumentParser(prog="kafka-features", description="This tool manages feature flags in Kafka.")
    connection = parser.add_mutually_exclusive_group(required=True)
    connection.add_argument(
        "--bootstrap-server",
        help="A comma-separated list of host:port pairs to use for establishing the connection to the Kafka cluster.",
    )
    connection.add_argument(
        "--bootstrap-controller",
        help="A comma-separated list of host:port pairs to use for establishing the connection to the KRaft quorum.",
    )
    parser.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("describe", help="Describes the current active feature flags.")
    release_help = (
        "The release version to {} all features to. For example, 3.9-IV0 will set metadata.version=21 and "
        "kraft.version=1. Use the version-mapping command to learn which features will be set for any given version."
    )
    upgrade = sub.add_parser("upgrade", help="Upgrade one or more feature flags.")
    upgrade.add_argument(
        "--metadata", help="DEPRECATED -- The level to which we should upgrade the metadata. For example, 3.3-IV3."
    )
    upgrade.add_argument("--release-version", help=release_help.format("update"))
    upgrade.add_argument(
        "--feature",
        action="append",
        help="A feature upgrade we should perform, in feature=level format. For example: `metadata.version=5`.",
    )
    upgrade.add_argument("--dry-run", action="store_true", help="Validate this upgrade, but do not perform it.")
    downgrade = sub.add_parser("downgrade", help="Upgrade one or more feature flags.")
    downgrade.add_argument(
        "--metadata", help="DEPRECATED -- The level to which we should downgrade the metadata. For example, 3.3-IV0."
    )
    downgrade.add_argument("--release-version", help=release_help.format("downgrade"))
    downgrade.add_argument(
        "--feature",
        action="append",
        help="A feature downgrade we should perform, in feature=level format. For example: `metadata.version=5`.",
    )
    downgrade.add_argument(
        "--unsafe", action="store_true", help="Perform this downgrade even if it may irreversibly destroy metadata."
    )
    downgrade.add_argument("--dry-run", action="store_true", help="Validate this downgrade, but do not perform it.")
    disable = sub.add_parser(
        "disable", help="Disable one or more feature flags. This is the same as downgrading the version to zero."
    )
    disable.add_argument("--feature", action="append", help="A feature flag to disable.")
    disable.add_argument(
        "--unsafe", action="store_true", help="Disable this feature flag even if it may irreversibly destroy metadata."
    )
    disable.add_argument("--dry-run", action="store_true", help="Perform a dry-run of this disable operation.")
    mapping = sub.add_parser(
        "version-mapping",
        help="Look up the corresponding features for a given metadata version. Using the command with no "
        "--release-version  argument will return the mapping for the latest stable metadata version",
    )
    mapping.add_argument(
        "--release-version",
        help="The release version to use for the corresponding feature mapping. The minimum is "
        f"{fv.metadata_version(fv.MINIMUM_VERSION).version}; the default is "
        f"{fv.metadata_version(fv.LATEST_PRODUCTION).version}",
    )
    dependencies = sub.add_parser(
        "feature-dependencies",
        help="Look up dependencies for a given feature version. If the feature is not known or the version not yet "
        "defined, an error is thrown. Multiple features can be specified.",
    )
    dependencies.add_argument(
        "--feature",
        action="append",
        required=True,
        help="The feature and version to look up dependencies for, in feature=version format. For example: "
        "`metadata.version=5`.",
    )
    return parser


def main(argv: list[str] | None = None, out=sys.stdout) -> int:
    if argv is None:  # run as the command (bin/ script, console script): the tools' logging
        configure_tool_logging()
    args = _parser().parse_args(argv)
    try:
        execute(args, out)
    except TerseError as e:
        print(e, file=sys.stderr)
        return 1
    except (OSError, errors.KafkaError, ValueError) as e:
        print(error_line(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    configure_tool_logging()
    sys.exit(main())
