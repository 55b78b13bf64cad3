"""Controller-backed admin APIs: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
IncrementalAlterConfigs (44), AlterConfigs (33), UpdateFeatures (57), AlterClientQuotas (49), ElectLeaders (43),
AlterPartitionReassignments (45), ListPartitionReassignments (46); DescribeConfigs (32)
and DescribeClientQuotas (48) from the broker's metadata cache.

Mirrors ``KafkaApis`` forwarding these mutations to the active controller (``ControllerApis``): the
QuorumController turns them into metadata records and its future completes once they are committed;
the response is sent from that completion, so no request handler thread ever waits.
"""

from __future__ import annotations

from pykbroker.config import group_config
from pykbroker.log.log_config import TOPIC_CONFIG_KEYS, LogConfig
from pykbroker.metadata.configuration_control_manager import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    SOURCE_TOPIC_CONFIG,
)
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.protocol.config_resource import ConfigResourceType
from pykbroker.server import error_responses
from pykbroker.server.quotas.client_quota_manager import user_of

SOURCE_GROUP_CONFIG = 8  # DescribeConfigsResponse.ConfigSource.GROUP_CONFIG
SOURCE_DYNAMIC_BROKER_CONFIG = 2  # DescribeConfigsResponse.ConfigSource.DYNAMIC_BROKER_CONFIG
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3  # DescribeConfigsResponse.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
_SOURCES = {
    "TOPIC_CONFIG": SOURCE_TOPIC_CONFIG,
    "STATIC_BROKER_CONFIG": SOURCE_STATIC_BROKER_CONFIG,
    "DEFAULT_CONFIG": SOURCE_DEFAULT_CONFIG,
}
# Kafka's DescribeConfigsResponse.ConfigType ids
_CONFIG_TYPES = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}


class AdminHandler:
    def __init__(self, helper, controller, metadata_cache, broker_config, log_defaults: LogConfig, dynamic_config=None):
        """``dynamic_config``: a callable returning the broker's DynamicBrokerConfig (None on a controller, or
        before the broker has one): BROKER resources of AlterConfigs/IncrementalAlterConfigs are validated
        with it before they are forwarded, as Kafka's ``ConfigAdminManager.preprocess``."""
        self.helper = helper
        self.controller = controller
        self.cache = metadata_cache
        self.broker_config = broker_config
        self.log_defaults = log_defaults
        self.dynamic_config = dynamic_config or (lambda: None)
        #: apply the controller mutation quota (KIP-599) to CreateTopics/DeleteTopics/CreatePartitions
        self.apply_mutation_quota = True

    def handlers(self) -> dict:
        return {
            ApiKeys.CREATE_TOPICS: self.handle_create_topics_request,
            ApiKeys.DELETE_TOPICS: self.handle_delete_topics_request,
            ApiKeys.CREATE_PARTITIONS: self.handle_create_partitions_request,
            ApiKeys.INCREMENTAL_ALTER_CONFIGS: self.handle_incremental_alter_configs_request,
            ApiKeys.ALTER_CONFIGS: self.handle_alter_configs_request,
            ApiKeys.DESCRIBE_CONFIGS: self.handle_describe_configs_request,
            ApiKeys.ELECT_LEADERS: self.handle_elect_leaders_request,
            ApiKeys.ALTER_PARTITION_REASSIGNMENTS: self.handle_alter_partition_reassignments_request,
            ApiKeys.LIST_PARTITION_REASSIGNMENTS: self.handle_list_partition_reassignments_request,
            ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: self.handle_alter_user_scram_credentials_request,
            ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS: self.handle_describe_user_scram_credentials_request,
            ApiKeys.CREATE_ACLS: self.handle_create_acls_request,
            ApiKeys.DELETE_ACLS: self.handle_delete_acls_request,
            ApiKeys.DESCRIBE_ACLS: self.handle_describe_acls_request,
            ApiKeys.UPDATE_FEATURES: self.handle_update_features_request,
            ApiKeys.ALTER_CLIENT_QUOTAS: self.handle_alter_client_quotas_request,
            ApiKeys.DESCRIBE_CLIENT_QUOTAS: self.handle_describe_client_quotas_request,
        }

    # -- UpdateFeatures (KIP-584) --------------------------------------------------------------------------
    def handle_update_features_request(self, request) -> None:
        """UpdateFeatures: the controller applies every update or none (see FeatureControlManager). A v0
        ``allow_downgrade`` is a safe downgrade (upgrade type 2). The answer is a top-level error; v0-v1 add one
        result per feature when it is NONE (Kafka's QuorumController.updateFeatures)."""
        body, version = request.body, request.context.api_version
        updates = [
            {
                "feature": u["feature"],
                "max_version_level": u["max_version_level"],
                "upgrade_type": u.get("upgrade_type", 1) if version >= 1 else (2 if u.get("allow_downgrade") else 1),
            }
            for u in body["feature_updates"]
        ]
        future = self.controller.update_features(
            {"timeout_ms": body["timeout_ms"], "feature_updates": updates, "validate_only": body["validate_only"]},
            **self._client(request),
        )

        def shape(result: dict) -> dict:
            response = {"error_code": result["error_code"], "error_message": result.get("error_message")}
            if version <= 1 and result["error_code"] == errors.NONE:
                response["results"] = [
                    {"feature": u["feature"], "error_code": errors.NONE, "error_message": None} for u in updates
                ]
            return response

        self._reply_when_done(request, future, shape)

    # -- client quotas (KIP-546) ---------------------------------------------------------------
    def handle_alter_client_quotas_request(self, request) -> None:
        """Validated and written by the controller (ClientQuotaControlManager); per-entity errors."""
        self._reply_when_done(request, self.controller.alter_client_quotas(request.body, **self._client(request)))

    def handle_describe_client_quotas_request(self, request) -> None:
        """From the metadata image (Kafka's ``ClientQuotasImage.describe``); a bad filter raises
        INVALID_REQUEST / UNSUPPORTED_VERSION, which KafkaApis turns into the error response."""
        from pykbroker.metadata.client_quotas import describe_client_quotas

        self.helper.send_response(request, describe_client_quotas(self.cache.image.client_quotas, request.body))

    # -- ACLs (stored in the metadata log as AccessControlEntryRecords) --------------------------
    def handle_create_acls_request(self, request) -> None:
        self._reply_when_done(request, self.controller.create_acls(request.body, **self._client(request)))

    def handle_delete_acls_request(self, request) -> None:
        self._reply_when_done(request, self.controller.delete_acls(request.body, **self._client(request)))

    def handle_describe_acls_request(self, request) -> None:
        from pykbroker.metadata.acls import describe_acls

        self.helper.send_response(request, describe_acls(self.cache.image.acls, request.body))

    # -- SCRAM credentials (KIP-554) -----------------------------------------------------------
    def handle_alter_user_scram_credentials_request(self, request) -> None:
        self._reply_when_done(
            request, self.controller.alter_user_scram_credentials(request.body, **self._client(request))
        )

    def handle_describe_user_scram_credentials_request(self, request) -> None:
        """The users' mechanisms and iterations from the metadata image (never salts or keys); an unknown
        user gets RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE (Kafka's messages)."""
        scram = self.cache.image.scram
        by_user: dict[str, list[dict]] = {}
        for (user, mechanism), (_, _, _, iterations) in sorted(scram.items()):
            by_user.setdefault(user, []).append({"mechanism": mechanism, "iterations": iterations})
        wanted = request.body.get("users")
        names = sorted(by_user) if not wanted else [u["name"] for u in wanted]
        results: list[dict] = []
        for name in dict.fromkeys(names):
            if names.count(name) > 1:
                results.append(
                    {
                        "user": name,
                        "error_code": errors.DUPLICATE_RESOURCE,
                        "error_message": (
                            "Cannot describe SCRAM credentials for the same user twice in a single request"
                        ),
                        "credential_infos": [],
                    }
                )
            elif name not in by_user:
                results.append(
                    {
                        "user": name,
                        "error_code": errors.RESOURCE_NOT_FOUND,
                        "error_message": "Attempt to describe a user credential that does not exist",
                        "credential_infos": [],
                    }
                )
            else:
                results.append(
                    {"user": name, "error_code": errors.NONE, "error_message": None, "credential_infos": by_user[name]}
                )
        self.helper.send_response(
            request, {"throttle_time_ms": 0, "error_code": errors.NONE, "error_message": None, "results": results}
        )

    def _client(self, request) -> dict:
        """``{"client": request}`` when the controller is a ForwardingManager (the request is then forwarded in
        an Envelope with the client's principal and address, KIP-590), else nothing."""
        return {"client": request} if getattr(self.controller, "forwards_clients", False) else {}

    def _reply_when_done(self, request, future, shape=lambda r: r, quota=None) -> None:
        """Send the future's body (through ``shape``) or the API's error response. ``quota``: the request's
        controller mutation quota, whose throttle time the response carries and the channel is muted for
        (Kafka's ``sendResponseMaybeThrottleWithControllerQuota``). A forwarded request's answer carries the
        controller's throttle time: the client's channel is muted for it (Kafka's ``sendForwardedResponse``)."""
        forwarded = getattr(self.controller, "forwards_clients", False)

        def done(f):
            try:
                body = shape(f.result())
            except Exception as e:  # noqa: BLE001 - any failure is the request's error response
                body = error_responses.build_error_response(
                    request.context.api_key, request.context.api_version, request.body, errors.for_exception(e), str(e)
                )
                if body is None:
                    self.helper.close_connection(request)
                    return
            throttle_ms = max(body.get("throttle_time_ms") or 0, 0)
            if quota is not None and quota.throttle_time > 0:
                throttle_ms = max(throttle_ms, quota.throttle_time)
                self.helper.throttle(self.helper.quotas.controller_mutation, request, quota.throttle_time)
            elif forwarded and throttle_ms > 0 and self.helper.quotas is not None:
                self.helper.throttle(self.helper.quotas.controller_mutation, request, throttle_ms)
            self.helper.send_response(request, {**body, "throttle_time_ms": throttle_ms})

        future.add_done_callback(done)

    def _mutation_quota(self, request, strict_since_version: int):
        """The request's controller mutation quota (KIP-599; Kafka's ``newQuotaFor``), None when not applied:
        no quota managers here, or :attr:`apply_mutation_quota` off (the controller listener) and the request not
        forwarded in an Envelope (KIP-590: then the context is the client's)."""
        quotas = self.helper.quotas
        if quotas is None or not quotas.controller_mutation.quotas_enabled or self._client(request):
            return None  # none here, or the controller applies it to the forwarded request
        if not self.apply_mutation_quota and getattr(request, "envelope", None) is None:
            return None
        ctx = request.context
        return quotas.controller_mutation.new_quota_for(
            user_of(ctx.principal), ctx.client_id or "", ctx.api_version, strict_since_version
        )

    def handle_create_topics_request(self, request) -> None:
        quota = self._mutation_quota(request, 6)
        kw = self._client(request) if quota is None else {"quota": quota, **self._client(request)}
        self._reply_when_done(request, self.controller.create_topics(request.body, **kw), quota=quota)

    def handle_delete_topics_request(self, request) -> None:
        quota = self._mutation_quota(request, 5)
        kw = self._client(request) if quota is None else {"quota": quota, **self._client(request)}
        self._reply_when_done(request, self.controller.delete_topics(request.body, **kw), quota=quota)

    def handle_create_partitions_request(self, request) -> None:
        quota = self._mutation_quota(request, 3)
        kw = self._client(request) if quota is None else {"quota": quota, **self._client(request)}
        self._reply_when_done(request, self.controller.create_partitions(request.body, **kw), quota=quota)

    def handle_elect_leaders_request(self, request) -> None:
        """ElectLeaders (key 43): preferred or unclean elections, done by the controller (see
        :mod:`pykbroker.metadata.leader_election`)."""
        self._reply_when_done(request, self.controller.elect_leaders(request.body, **self._client(request)))

    def handle_alter_partition_reassignments_request(self, request) -> None:
        """AlterPartitionReassignments (key 45, KIP-455): per-partition errors from the controller (see
        :mod:`pykbroker.metadata.partition_reassignment`); ALTER on the cluster (checked by KafkaApis)."""
        self._reply_when_done(
            request, self.controller.alter_partition_reassignments(request.body, **self._client(request))
        )

    def handle_list_partition_reassignments_request(self, request) -> None:
        """ListPartitionReassignments (key 46): the controller's ongoing reassignments; DESCRIBE on the cluster."""
        self._reply_when_done(
            request, self.controller.list_partition_reassignments(request.body, **self._client(request))
        )

    def handle_incremental_alter_configs_request(self, request) -> None:
        refused = self._preprocess_broker_resources(request.body["resources"], incremental=True)
        self._forward_alter_configs(request, request.body["resources"], refused)

    def handle_alter_configs_request(self, request) -> None:
        """Legacy AlterConfigs replaces a resource's whole override set: expressed as DELETE of every
        current override followed by SET of the given ones."""
        refused = self._preprocess_broker_resources(request.body["resources"], incremental=False)
        resources = []
        for r in request.body["resources"]:
            current = dict(self.cache.image.configs.get((r["resource_type"], r["resource_name"]), {}))
            given = {c["name"]: c["value"] for c in r["configs"]}
            ops = [{"name": n, "config_operation": 1, "value": None} for n in current if n not in given]
            ops += [{"name": n, "config_operation": 0, "value": v} for n, v in given.items()]
            resources.append({"resource_type": r["resource_type"], "resource_name": r["resource_name"], "configs": ops})
        self._forward_alter_configs(request, resources, refused)

    def _forward_alter_configs(self, request, resources: list[dict], refused: dict[int, dict]) -> None:
        """Forward the resources not refused by the broker's preprocessing to the controller; answer every
        resource in request order."""
        kept = [r for i, r in enumerate(resources) if i not in refused]
        if not kept:
            self.helper.send_response(
                request, {"throttle_time_ms": 0, "responses": [refused[i] for i in range(len(resources))]}
            )
            return
        future = self.controller.incremental_alter_configs(
            {"resources": kept, "validate_only": request.body["validate_only"]}, **self._client(request)
        )

        def merge(body: dict) -> dict:
            answers = iter(body["responses"])
            return {**body, "responses": [refused[i] if i in refused else next(answers) for i in range(len(resources))]}

        self._reply_when_done(request, future, merge)

    def _preprocess_broker_resources(self, resources: list[dict], incremental: bool) -> dict[int, dict]:
        """Kafka's ``ConfigAdminManager.preprocess`` for BROKER resources on a broker: the resource must be the
        cluster default or this broker, the keys unique and set to values, and the resulting dynamic configs
        valid for this running broker (``DynamicBrokerConfig.validate``). Returns ``{resource index:
        response entry}`` for the refused ones (INVALID_REQUEST with Kafka's messages)."""
        dynamic_config = self.dynamic_config()
        refused: dict[int, dict] = {}
        if dynamic_config is None:
            return refused
        for i, r in enumerate(resources):
            if r["resource_type"] != ConfigResourceType.BROKER:
                continue
            name = r["resource_name"]
            try:
                self._check_broker_resource(name)
                props = self._new_broker_configs(name, r["configs"], incremental)
                dynamic_config.validate(props, per_broker=name != "")
            except errors.KafkaError as e:
                refused[i] = {
                    "error_code": e.code,
                    "error_message": e.message,
                    "resource_type": ConfigResourceType.BROKER,
                    "resource_name": name,
                }
        return refused

    def _check_broker_resource(self, name: str) -> None:
        if name == "":
            return
        try:
            node_id = int(name)
        except ValueError:
            raise errors.InvalidRequestError(f"Node id must be an integer, but it is: {name}") from None
        if node_id != self.broker_config.node_id:
            raise errors.InvalidRequestError(
                f"Unexpected broker id, expected {self.broker_config.node_id}, but received {name}"
            )

    def _new_broker_configs(self, name: str, configs: list[dict], incremental: bool) -> dict[str, str]:
        """The broker resource's dynamic configs after the request (legacy AlterConfigs: exactly those given)."""
        from pykbroker.config.dynamic_broker_config_def import config_key, listener_base_name

        names = [c["name"] for c in configs]
        if len(set(names)) != len(names):
            raise errors.InvalidRequestError("Error due to duplicate config keys")
        ops = [(c["name"], int(c.get("config_operation", 0)) if incremental else 0, c["value"]) for c in configs]
        nulls = [n for n, op, v in ops if op != 1 and v is None]
        if nulls:
            raise errors.InvalidRequestError("Null value not supported for : " + ", ".join(nulls))
        if not incremental:
            return {n: v for n, _, v in ops}
        props = dict(self.cache.image.configs.get((ConfigResourceType.BROKER, name), {}))
        for n, op, value in ops:
            if op == 0:
                props[n] = value
            elif op == 1:
                props.pop(n, None)
            elif op in (2, 3):
                key = config_key(listener_base_name(n) or n)
                if key is None or key.type != "list":
                    verb = "APPEND" if op == 2 else "SUBTRACT"
                    raise errors.InvalidConfigurationError(f"Can't {verb} to key {n} because its type is not LIST.")
                items = [v for v in (props.get(n) or "").split(",") if v]
                changes = [v.strip() for v in value.split(",") if v.strip()]
                items = (
                    items + [v for v in changes if v not in items]
                    if op == 2
                    else [v for v in items if v not in changes]
                )
                props[n] = ",".join(items)
            else:
                raise errors.InvalidRequestError(f"Unknown operations type {op}")
        return props

    # -- DescribeConfigs -----------------------------------------------------------------------
    def handle_describe_configs_request(self, request) -> None:
        body = request.body
        results = []
        for r in body["resources"]:
            rtype, name, keys = r["resource_type"], r["resource_name"], r["configuration_keys"]
            try:
                if rtype == ConfigResourceType.TOPIC:
                    configs = self._topic_configs(name, body["include_synonyms"], body["include_documentation"])
                elif rtype == ConfigResourceType.BROKER:
                    configs = self._broker_configs(name, body["include_synonyms"])
                elif rtype == ConfigResourceType.GROUP:
                    configs = self._group_configs(name, body["include_synonyms"], body["include_documentation"])
                else:
                    raise errors.InvalidRequestError(f"Unsupported resource type {rtype}")
                if keys is not None:
                    configs = [c for c in configs if c["name"] in keys]
                results.append(
                    {
                        "error_code": errors.NONE,
                        "error_message": None,
                        "resource_type": rtype,
                        "resource_name": name,
                        "configs": configs,
                    }
                )
            except errors.KafkaError as e:
                results.append(
                    {
                        "error_code": e.code,
                        "error_message": str(e),
                        "resource_type": rtype,
                        "resource_name": name,
                        "configs": [],
                    }
                )
        self.helper.send_response(request, {"throttle_time_ms": 0, "results": results})

    def _topic_configs(self, topic: str, synonyms: bool, documentation: bool) -> list[dict]:
        if not self.cache.contains_topic(topic):
            raise errors.UnknownTopicOrPartitionError(f"Topic {topic} does not exist")
        config = self.log_defaults.with_overrides(dict(self.cache.topic_configs(topic)))
        out = []
        for name, value in sorted(config.values().items()):
            source = _SOURCES.get(config.source_of(name)[0], SOURCE_DEFAULT_CONFIG)
            text = LogConfig.value_to_string(value)
            key = TOPIC_CONFIG_KEYS.get(name)
            out.append(
                {
                    "name": name,
                    "value": text,
                    "read_only": False,
                    "is_default": source == SOURCE_DEFAULT_CONFIG,
                    "config_source": source,
                    "is_sensitive": False,
                    "synonyms": [{"name": name, "value": text, "source": source}] if synonyms else [],
                    "config_type": _CONFIG_TYPES.get(str(getattr(key, "type", "")).lower(), 0),
                    "documentation": getattr(key, "doc", None) if documentation else None,
                }
            )
        return out

    def _group_configs(self, group: str, synonyms: bool, documentation: bool) -> list[dict]:
        """A group's configs (``ConfigHelper`` for GROUP): overrides from the metadata image (source
        GROUP_CONFIG), else the broker's ``group.consumer.*`` defaults (DEFAULT_CONFIG). The group need not
        exist. Errors: INVALID_REQUEST for an empty group name."""
        if not group:
            raise errors.InvalidRequestError("Group name must not be empty")
        overrides = dict(self.cache.image.configs.get((ConfigResourceType.GROUP, group), {}))
        defaults = group_config.GroupConfigDefaults.from_broker_config(self.broker_config)
        return group_config.describe(
            overrides,
            defaults,
            synonyms,
            documentation,
            SOURCE_DEFAULT_CONFIG,
            SOURCE_GROUP_CONFIG,
            _CONFIG_TYPES["int"],
        )

    def _broker_configs(self, name: str, synonyms: bool) -> list[dict]:
        """A broker's configs as Kafka's ``ConfigHelper`` describes them: for this broker's id every config,
        its value and source from the first of DYNAMIC_BROKER_CONFIG (the ConfigRecords of resource
        ``(BROKER, id)`` in the metadata image), DYNAMIC_DEFAULT_BROKER_CONFIG (resource ``(BROKER, "")``),
        STATIC_BROKER_CONFIG (server.properties) and DEFAULT_CONFIG, with the synonyms in that order; for
        the cluster default (name ``""``) only its dynamic default configs. Errors: INVALID_REQUEST for
        another broker's id.

        ``read_only`` is false for the keys that can be updated dynamically (``dynamic_broker_keys``); the
        DynamicBrokerConfig applies them to the running broker. A listener key ``listener.name.<l>.<key>``
        has its base ``<key>`` as further synonyms (Kafka's ``brokerConfigSynonyms``); PASSWORD keys are
        sensitive (no value)."""
        if name not in ("", str(self.broker_config.node_id)):
            raise errors.InvalidRequestError(
                f"Unexpected broker id, expected {self.broker_config.node_id} but received {name}"
            )
        from pykbroker.config.dynamic_broker_config_def import (
            DYNAMIC_ONLY_CONFIG_DEF,
            QUOTA_KEYS,
            config_key,
            is_password,
            listener_base_name,
        )
        from pykbroker.config.kafka_config_def import BROKER_CONFIG_DEF
        from pykbroker.metadata.log_config_schema import dynamic_broker_keys

        dynamic_keys = dynamic_broker_keys()
        image_configs = self.cache.image.configs
        cluster_default = dict(image_configs.get((ConfigResourceType.BROKER, ""), {}))
        per_broker = dict(image_configs.get((ConfigResourceType.BROKER, str(self.broker_config.node_id)), {}))
        if name == "":
            keys = sorted(cluster_default)
            per_broker = {}
        else:
            listed = [*BROKER_CONFIG_DEF.keys, *(k for k in DYNAMIC_ONLY_CONFIG_DEF.keys if k not in QUOTA_KEYS)]
            extra = {*cluster_default, *per_broker, *(k for k in self.broker_config.originals if listener_base_name(k))}
            keys = listed + sorted(extra - set(listed))
        out = []
        originals = self.broker_config.originals
        for key in keys:
            base = listener_base_name(key)
            definition = config_key(base or key)
            config_type = getattr(definition, "type", "string")
            # Kafka's ConfigHelper.configSynonyms: by source first, then by synonym; null defaults left out
            names = (key, base) if base else (key,)
            found: list[tuple[str, int, str | None]] = []
            found += [(n, SOURCE_DYNAMIC_BROKER_CONFIG, per_broker[n]) for n in names if n in per_broker]
            found += [
                (n, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG, cluster_default[n]) for n in names if n in cluster_default
            ]
            if name != "":
                found += [
                    (n, SOURCE_STATIC_BROKER_CONFIG, _broker_value_text(self.broker_config.values.get(n, originals[n])))
                    for n in names
                    if n in originals
                ]
                if definition is not None and definition.has_default and definition.default is not None:
                    found.append((base or key, SOURCE_DEFAULT_CONFIG, _broker_value_text(definition.default)))
            _, source, text = found[0] if found else (key, SOURCE_DEFAULT_CONFIG, None)
            sensitive = config_type == "password" or is_password(key)
            read_only = (base or key) not in dynamic_keys if base else key not in dynamic_keys
            out.append(
                {
                    "name": key,
                    "value": None if sensitive else text,
                    "read_only": read_only,
                    "is_default": source == SOURCE_DEFAULT_CONFIG,
                    "config_source": source,
                    "is_sensitive": sensitive,
                    "synonyms": (
                        [{"name": n, "value": None if sensitive else v, "source": s} for n, s, v in found]
                        if synonyms
                        else []
                    ),
                    "config_type": _CONFIG_TYPES.get(config_type, 0),
                    "documentation": None,
                }
            )
        return out


def _broker_value_text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _resource_errors(body, code, message, key="responses"):
    return {
        "throttle_time_ms": 0,
        key: [
            {
                "error_code": code,
                "error_message": message,
                "resource_type": r["resource_type"],
                "resource_name": r["resource_name"],
            }
            for r in body["resources"]
        ],
    }


@error_responses.register(ApiKeys.CREATE_TOPICS)
def _create_topics_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "error_code": code,
                "error_message": message,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": None,
            }
            for t in body["topics"]
        ],
    }


@error_responses.register(ApiKeys.DELETE_TOPICS)
def _delete_topics_error(version, body, code, message):
    topics = (
        [(t["name"], t["topic_id"]) for t in body["topics"]]
        if version >= 6
        else [(n, None) for n in body["topic_names"]]
    )
    return {
        "throttle_time_ms": 0,
        "responses": [{"name": n, "topic_id": i, "error_code": code, "error_message": message} for n, i in topics],
    }


@error_responses.register(ApiKeys.CREATE_PARTITIONS)
def _create_partitions_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "results": [{"name": t["name"], "error_code": code, "error_message": message} for t in body["topics"]],
    }


@error_responses.register(ApiKeys.INCREMENTAL_ALTER_CONFIGS)
def _iac_error(version, body, code, message):
    return _resource_errors(body, code, message)


@error_responses.register(ApiKeys.ALTER_CONFIGS)
def _ac_error(version, body, code, message):
    return _resource_errors(body, code, message)


@error_responses.register(ApiKeys.DESCRIBE_CONFIGS)
def _dc_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "results": [
            {
                "error_code": code,
                "error_message": message,
                "resource_type": r["resource_type"],
                "resource_name": r["resource_name"],
                "configs": [],
            }
            for r in body["resources"]
        ],
    }


@error_responses.register(ApiKeys.ELECT_LEADERS)
def _elect_leaders_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "replica_election_results": [
            {
                "topic": t["topic"],
                "partition_result": [
                    {"partition_id": p, "error_code": code, "error_message": message} for p in t["partitions"]
                ],
            }
            for t in body.get("topic_partitions") or []
        ],
    }


@error_responses.register(ApiKeys.ALTER_PARTITION_REASSIGNMENTS)
def _alter_partition_reassignments_error(version, body, code, message):
    """Kafka's ``AlterPartitionReassignmentsRequest.getErrorResponse``: the top-level error and every partition's."""
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "error_message": message,
        "responses": [
            {
                "name": t["name"],
                "partitions": [
                    {"partition_index": p["partition_index"], "error_code": code, "error_message": message}
                    for p in t.get("partitions") or []
                ],
            }
            for t in body.get("topics") or []
        ],
    }


@error_responses.register(ApiKeys.LIST_PARTITION_REASSIGNMENTS)
def _list_partition_reassignments_error(version, body, code, message):
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "topics": []}


@error_responses.register(ApiKeys.DESCRIBE_CLIENT_QUOTAS)
def _describe_client_quotas_error(version, body, code, message):
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "entries": None}


@error_responses.register(ApiKeys.ALTER_CLIENT_QUOTAS)
def _alter_client_quotas_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "entries": [
            {"error_code": code, "error_message": message, "entity": e["entity"]} for e in body.get("entries") or []
        ],
    }
