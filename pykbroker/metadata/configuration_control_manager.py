"""ConfigurationControlManager: dynamic configs of topics, brokers and groups (Kafka's
``ConfigurationControlManager``).

``incremental_alter_configs`` applies IncrementalAlterConfigs operations (SET 0, DELETE 1, APPEND 2,
SUBTRACT 3) to resources and emits one ``ConfigRecord`` per key whose value changes (value None =
delete). What is a legal config is the broker's business: it supplies a :class:`ConfigSchema` whose
``validate`` sees the resulting full set of overrides and raises a KafkaError (INVALID_CONFIG,
POLICY_VIOLATION...) to refuse it, and whose ``is_list`` says which keys APPEND/SUBTRACT may touch.

Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pykbroker.config.topic_config import (
    CLEANUP_POLICY_CONFIG,
    FOLLOWER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
    LEADER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
    MIN_INSYNC_REPLICAS_CONFIG,
    UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG,
)
from pykbroker.metadata.controller_result import ControllerResult, api_error
from pykbroker.metadata.records import (
    CONFIG_RECORD,
    ApiMessageAndVersion,
    config_record,
)
from pykbroker.protocol import errors
from pykbroker.protocol.config_resource import ConfigResourceType

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# DescribeConfigs / CreateTopics config_source ids
SOURCE_TOPIC_CONFIG = 1
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5

TOPIC_LIST_CONFIGS = frozenset(
    {
        CLEANUP_POLICY_CONFIG,
        LEADER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
        FOLLOWER_REPLICATION_THROTTLED_REPLICAS_CONFIG,
    }
)


class ConfigSchema:
    """The broker-supplied config rules. The default accepts everything and knows the list-typed topic
    configs; a broker subclass plugs in its ``LogConfig``/``KafkaConfig`` definitions."""

    def is_list(self, resource_type: int, name: str) -> bool:
        return resource_type == ConfigResourceType.TOPIC and name in TOPIC_LIST_CONFIGS

    def validate(self, resource_type: int, resource_name: str, configs: dict[str, str]) -> None:
        """Raise a KafkaError if ``configs`` (the complete overrides after the change) are invalid."""

    def unclean_leader_election_enabled(self, overrides: dict[str, str]) -> bool:
        """``unclean.leader.election.enable`` for a topic with ``overrides`` (the default schema: the
        override, else Kafka's default false)."""
        return overrides.get(UNCLEAN_LEADER_ELECTION_ENABLE_CONFIG, "false").strip().lower() == "true"

    def min_insync_replicas(self, overrides: dict[str, str]) -> int:
        """``min.insync.replicas`` for a topic with ``overrides`` (the default schema: the override, else
        Kafka's default 1)."""
        try:
            return int(overrides.get(MIN_INSYNC_REPLICAS_CONFIG, "1"))
        except ValueError:
            return 1

    def effective_topic_configs(self, overrides: dict[str, str]) -> list[dict]:
        """CreateTopics ``configs`` entries ``{name, value, read_only, config_source, is_sensitive}``
        for a new topic with ``overrides``; the default lists the overrides only."""
        return [
            {"name": k, "value": v, "read_only": False, "config_source": SOURCE_TOPIC_CONFIG, "is_sensitive": False}
            for k, v in sorted(overrides.items())
        ]


class ConfigurationControlManager:
    def __init__(
        self,
        schema: ConfigSchema | None = None,
        topic_exists: Callable[[str], bool] = lambda name: False,
        broker_exists: Callable[[int], bool] = lambda broker_id: True,
    ):
        self.schema = schema or ConfigSchema()
        self.topic_exists = topic_exists
        self.broker_exists = broker_exists
        self.configs: dict[tuple[int, str], dict[str, str]] = {}

    def get(self, resource_type: int, resource_name: str) -> dict[str, str]:
        return dict(self.configs.get((resource_type, resource_name), {}))

    def unclean_leader_election_enabled_for_topic(self, topic: str) -> bool:
        """Kafka's ``uncleanLeaderElectionEnabledForTopic``: the topic override, else the broker default."""
        return self.schema.unclean_leader_election_enabled(self.configs.get((ConfigResourceType.TOPIC, topic), {}))

    def min_isr_for_topic(self, topic: str) -> int:
        """The topic's ``min.insync.replicas``: its override, else the broker default (Kafka's
        ``ConfigurationControlManager.getTopicConfig`` for ``min.insync.replicas``)."""
        return self.schema.min_insync_replicas(self.configs.get((ConfigResourceType.TOPIC, topic), {}))

    # ---- operations --------------------------------------------------------------------------
    def incremental_alter_configs(self, request: dict[str, Any]) -> ControllerResult[dict]:
        """``request``: IncrementalAlterConfigsRequest fields ``resources`` [{resource_type,
        resource_name, configs [{name, config_operation, value}]}], ``validate_only``. Response:
        ``{responses: [{error_code, error_message, resource_type, resource_name}]}``; no records when
        ``validate_only``."""
        records: list[ApiMessageAndVersion] = []
        responses = []
        seen: set[tuple[int, str]] = set()
        for res in request.get("resources", []):
            rtype, rname = int(res["resource_type"]), res["resource_name"]
            if (rtype, rname) in seen:
                err = api_error(errors.INVALID_REQUEST, f"Duplicate resource {rname} in the request")
            else:
                seen.add((rtype, rname))
                ops = [(c["name"], int(c.get("config_operation", SET)), c.get("value")) for c in res.get("configs", [])]
                result = self.incremental_alter_config(rtype, rname, ops, new_resource=False)
                assert result.response is not None  # incremental_alter_config always answers an ApiError
                err = result.response
                if err["error_code"] == errors.NONE:
                    records.extend(result.records)
            responses.append({**err, "resource_type": rtype, "resource_name": rname})
        if request.get("validate_only"):
            records = []
        return ControllerResult(records, {"responses": responses}, atomic=False)

    def incremental_alter_config(
        self, resource_type: int, resource_name: str, ops: list[tuple[str, int, str | None]], new_resource: bool
    ) -> ControllerResult[dict]:
        """Apply ``ops`` (name, operation, value) to one resource. ``new_resource`` skips the existence
        check (CreateTopics uses it for the new topic's configs). Response is an ``api_error`` dict."""
        error = self._check_resource(resource_type, resource_name, new_resource)
        if error is not None:
            return ControllerResult([], error)
        names = [name for name, _, _ in ops]
        if len(set(names)) != len(names):
            return ControllerResult(
                [], api_error(errors.INVALID_REQUEST, f"Error due to duplicate config keys in {resource_name}")
            )
        current = self.configs.get((resource_type, resource_name), {})
        new = dict(current)
        for name, op, value in ops:
            if op == SET:
                if value is None:
                    return ControllerResult(
                        [], api_error(errors.INVALID_REQUEST, f"Null value not supported for SET of {name}")
                    )
                new[name] = value
            elif op == DELETE:
                new.pop(name, None)
            elif op in (APPEND, SUBTRACT):
                if not self.schema.is_list(resource_type, name):
                    return ControllerResult(
                        [],
                        api_error(
                            errors.INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST."
                        ),
                    )
                items = [v for v in (new.get(name) or "").split(",") if v]
                changes = [v.strip() for v in (value or "").split(",") if v.strip()]
                if op == APPEND:
                    items += [v for v in changes if v not in items]
                else:
                    items = [v for v in items if v not in changes]
                new[name] = ",".join(items)
            else:
                return ControllerResult([], api_error(errors.INVALID_REQUEST, f"Unknown operation type {op}"))
        try:
            self.schema.validate(resource_type, resource_name, new)
        except errors.KafkaError as e:
            return ControllerResult([], api_error(e.code, e.message))
        except ValueError as e:
            return ControllerResult([], api_error(errors.INVALID_CONFIG, str(e)))
        records = [
            config_record(resource_type, resource_name, k, new.get(k)) for k in names if new.get(k) != current.get(k)
        ]
        return ControllerResult(records, api_error(errors.NONE))

    def _check_resource(self, rtype: int, rname: str, new_resource: bool) -> dict | None:
        if rtype == ConfigResourceType.TOPIC:
            if not new_resource and not self.topic_exists(rname):
                return api_error(errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{rname}' does not exist.")
            return None
        if rtype == ConfigResourceType.BROKER:
            if rname == "":
                return None  # cluster-wide default
            try:
                broker_id = int(rname)
            except ValueError:
                return api_error(errors.INVALID_REQUEST, f"Invalid broker name {rname}")
            if not self.broker_exists(broker_id):
                return api_error(errors.INVALID_REQUEST, f"Unknown broker {broker_id}")
            return None
        if rtype == ConfigResourceType.GROUP:  # any group name: configs may precede the group
            if rname == "":
                return api_error(errors.INVALID_REQUEST, "Default group resources are not allowed.")
            return None
        return api_error(errors.INVALID_REQUEST, f"Unsupported resource type {rtype}")

    # ---- replay ------------------------------------------------------------------------------
    def replay(self, record: ApiMessageAndVersion) -> None:
        if record.name != CONFIG_RECORD:
            return
        d = record.data
        key = (d["resource_type"], d["resource_name"])
        value = d.get("value")
        if value is None:
            configs = self.configs.get(key)
            if configs is not None:
                configs.pop(d["name"], None)
                if not configs:
                    del self.configs[key]
        else:
            self.configs.setdefault(key, {})[d["name"]] = value

    def delete_topic_configs(self, topic_name: str) -> None:
        self.configs.pop((ConfigResourceType.TOPIC, topic_name), None)
