"""ControllerApis: the controller-bound APIs on the controller listener (Kafka's ``ControllerApis``).

* Broker lifecycle: BrokerRegistration (62), BrokerHeartbeat (63) and UnregisterBroker (64).
* Producer id blocks: AllocateProducerIds (67).
* Log directories of replicas (KIP-858): AssignReplicasToDirs (73).
* Mutations that brokers forward: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
  IncrementalAlterConfigs (44), UpdateFeatures (57), AlterClientQuotas (49), ElectLeaders (43),
  AlterPartitionReassignments (45), ListPartitionReassignments (46, a read) and the delegation token writes
  CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40). These go through the same
  AdminHandler code as on a single node.
* Envelope (58, KIP-590): a broker forwards its clients' mutations wrapped in an Envelope with the client's
  principal and address. The sender needs CLUSTER_ACTION on the cluster (else CLUSTER_AUTHORIZATION_FAILED, checked
  by KafkaApis); the inner request is unwrapped (:mod:`pykbroker.server.envelope`, Kafka's ``EnvelopeUtils``) and
  dispatched like any request of this listener, so it is authorized as the client and the controller mutation
  quota (KIP-599) is applied per the client's user and client id; its response goes back inside the
  EnvelopeResponse (``RequestHelper.send_response``).

Each becomes an operation of the local QuorumController, whose future completes on the controller's event
thread once the records are committed. The response is sent from that completion, so no handler thread
waits. A controller that is not active answers NOT_CONTROLLER, and the broker's
NodeToControllerChannelManager then retries at the new leader.
"""

from __future__ import annotations

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server.handlers.admin import AdminHandler
from pykbroker.server.handlers.delegation_tokens import DelegationTokenHandlers


class ControllerApis:
    def __init__(self, helper, controller, broker_config, log_defaults, cluster_info=None):
        """``cluster_info()`` -> ``(cluster_id, active controller id, {node id: (host, port)})`` answers
        DescribeCluster with ``endpoint_type`` 2 (KIP-919, ``--bootstrap-controller``); without it the
        listener leaves DescribeCluster to another handler family (a combined node's MetadataHandler)."""
        self.helper = helper
        self.controller = controller
        self.cluster_info = cluster_info
        self.admin = AdminHandler(helper, controller, None, broker_config, log_defaults)
        self.tokens = DelegationTokenHandlers(helper, controller)
        # The controller mutation quota is applied to the requests brokers forward in an Envelope (the client's
        # identity); a request sent here directly comes from a node (auto-created topics) and is not limited.
        self.admin.apply_mutation_quota = False
        #: ``dispatch(request)``: this listener's KafkaApis.handle, for the requests an Envelope carries (set by
        #: the server once the listener's KafkaApis is built)
        self.dispatch = None

    def handlers(self) -> dict:
        result = {
            ApiKeys.BROKER_REGISTRATION: self.handle_broker_registration_request,
            ApiKeys.BROKER_HEARTBEAT: self.handle_broker_heartbeat_request,
            ApiKeys.UNREGISTER_BROKER: self.handle_unregister_broker_request,
            ApiKeys.ALLOCATE_PRODUCER_IDS: self.handle_allocate_producer_ids_request,
            ApiKeys.ASSIGN_REPLICAS_TO_DIRS: self.handle_assign_replicas_to_dirs_request,
            ApiKeys.ALTER_PARTITION: self.handle_alter_partition_request,
            ApiKeys.CREATE_TOPICS: self.admin.handle_create_topics_request,
            ApiKeys.DELETE_TOPICS: self.admin.handle_delete_topics_request,
            ApiKeys.CREATE_PARTITIONS: self.admin.handle_create_partitions_request,
            ApiKeys.INCREMENTAL_ALTER_CONFIGS: self.admin.handle_incremental_alter_configs_request,
            ApiKeys.ELECT_LEADERS: self.admin.handle_elect_leaders_request,
            ApiKeys.ALTER_PARTITION_REASSIGNMENTS: self.admin.handle_alter_partition_reassignments_request,
            ApiKeys.LIST_PARTITION_REASSIGNMENTS: self.admin.handle_list_partition_reassignments_request,
            ApiKeys.ALTER_USER_SCRAM_CREDENTIALS: self.admin.handle_alter_user_scram_credentials_request,
            ApiKeys.CREATE_ACLS: self.admin.handle_create_acls_request,
            ApiKeys.DELETE_ACLS: self.admin.handle_delete_acls_request,
            ApiKeys.UPDATE_FEATURES: self.admin.handle_update_features_request,
            ApiKeys.ALTER_CLIENT_QUOTAS: self.admin.handle_alter_client_quotas_request,
            ApiKeys.ENVELOPE: self.handle_envelope_request,
            **self.tokens.handlers(),
        }
        if self.cluster_info is not None:
            result[ApiKeys.DESCRIBE_CLUSTER] = self.handle_describe_cluster_request
        return result

    def handle_envelope_request(self, request) -> None:
        """Kafka's ``ControllerApis.handleEnvelopeRequest``: unwrap and dispatch the forwarded request (errors of
        the envelope itself, see :func:`~pykbroker.server.envelope.parse_forwarded_request`, are raised and answered
        as an EnvelopeResponse error by KafkaApis)."""
        from pykbroker.server.envelope import parse_forwarded_request

        if self.dispatch is None:
            raise errors.UnsupportedVersionError("This listener does not accept forwarded requests")
        self.dispatch(parse_forwarded_request(request))

    def handle_describe_cluster_request(self, request) -> None:
        """KIP-919: a controller describes the controllers (endpoint_type 2); asked for brokers
        (endpoint_type 1) it answers MISMATCHED_ENDPOINT_TYPE, as Kafka's ControllerApis does."""
        cluster_id, controller_id, controllers = self.cluster_info()
        endpoint_type = request.body.get("endpoint_type", 1)
        body = {
            "throttle_time_ms": 0,
            "error_code": errors.NONE,
            "error_message": None,
            "endpoint_type": endpoint_type,
            "cluster_id": cluster_id,
            "controller_id": controller_id,
            "brokers": [],
            "cluster_authorized_operations": -2147483648,
        }
        if endpoint_type != 2:
            body["error_code"] = errors.MISMATCHED_ENDPOINT_TYPE
            body["error_message"] = (
                "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER"
            )
        else:
            body["brokers"] = [
                {"broker_id": node, "host": host, "port": port, "rack": None}
                for node, (host, port) in sorted(controllers.items())
            ]
        self.helper.send_response(request, body)

    def _reply(self, request, future, error_body) -> None:
        """Send the future's body, or ``error_body(code, message)`` when it failed. Only the fields of
        the error body's shape are sent (a controller result may carry more, e.g. ``error_message``)."""

        def done(f):
            try:
                result = f.result()
                body = {k: result.get(k, v) for k, v in error_body(errors.NONE, None).items()}
            except Exception as e:  # noqa: BLE001 - NotControllerError, timeouts, bugs: answered with the code
                body = error_body(errors.for_exception(e), str(e))
            self.helper.send_response(request, {"throttle_time_ms": 0, **body})

        future.add_done_callback(done)

    def handle_broker_registration_request(self, request) -> None:
        self._reply(
            request,
            self.controller.register_broker(request.body),
            lambda code, msg: {"error_code": code, "broker_epoch": -1},
        )

    def handle_broker_heartbeat_request(self, request) -> None:
        self._reply(
            request,
            self.controller.process_broker_heartbeat(request.body),
            lambda code, msg: {"error_code": code, "is_caught_up": False, "is_fenced": True, "should_shut_down": False},
        )

    def handle_unregister_broker_request(self, request) -> None:
        self._reply(
            request,
            self.controller.unregister_broker(request.body["broker_id"]),
            lambda code, msg: {"error_code": code, "error_message": msg},
        )

    def handle_alter_partition_request(self, request) -> None:
        self._reply(
            request,
            self.controller.alter_partition(request.body, request.context.api_version),
            lambda code, msg: {"error_code": code, "topics": []},
        )

    def handle_assign_replicas_to_dirs_request(self, request) -> None:
        self._reply(
            request,
            self.controller.assign_replicas_to_dirs(request.body),
            lambda code, msg: {"error_code": code, "directories": []},
        )

    def handle_allocate_producer_ids_request(self, request) -> None:
        self._reply(
            request,
            self.controller.allocate_producer_ids(request.body),
            lambda code, msg: {"error_code": code, "producer_id_start": -1, "producer_id_len": 0},
        )
