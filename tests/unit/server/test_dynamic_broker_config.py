"""Dynamic broker configs applied to a running broker (in-process EmbeddedKafka): the request handler
pool resized by num.io.threads, the topic defaults, connection quotas; and the keys the controller accepts."""

from __future__ import annotations

import pytest

from pykbroker.clients.broker_connection import BrokerConnection
from pykbroker.metadata.log_config_schema import dynamic_broker_keys, validate_dynamic_broker_configs
from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.testing import EmbeddedKafka
from tests.helpers.wait import wait_until


def _alter(bootstrap: str, name: str, key: str, value: str | None) -> None:
    with BrokerConnection.to(bootstrap) as c:
        r = c.request(
            ApiKeys.INCREMENTAL_ALTER_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": 4,
                        "resource_name": name,
                        "configs": [{"name": key, "config_operation": 0 if value is not None else 1, "value": value}],
                    }
                ],
                "validate_only": False,
            },
        )
    assert r["responses"][0]["error_code"] == errors.NONE, r


def test_keys_the_controller_accepts():
    keys = dynamic_broker_keys()
    assert {"log.retention.ms", "message.max.bytes", "log.cleanup.policy", "num.io.threads"} <= keys
    assert {"sasl.kerberos.min.time.before.relogin", "num.network.threads", "num.replica.fetchers"} <= keys
    assert "log.dirs" not in keys and "node.id" not in keys
    validate_dynamic_broker_configs({"log.retention.ms": "1000", "num.io.threads": "4"})
    validate_dynamic_broker_configs({"custom.key": "x", "listener.name.plaintext.max.connections": "9"}, False)
    # listeners is one of Kafka's dynamic keys (DynamicListenerConfig): only log.dirs is refused here
    with pytest.raises(errors.InvalidRequestError, match=r"^Cannot update these configs dynamically: Set\(log.dirs\)$"):
        validate_dynamic_broker_configs({"log.dirs": "/x", "listeners": "PLAINTEXT://:1"})
    # bad values are INVALID_REQUEST in Kafka (ConfigAdminManager, KAFKA-13609)
    with pytest.raises(errors.InvalidRequestError, match="Value must be at least 14"):
        validate_dynamic_broker_configs({"log.segment.bytes": "3"})
    with pytest.raises(errors.InvalidRequestError, match="Not a number of type INT"):
        validate_dynamic_broker_configs({"num.io.threads": "zero"})
    with pytest.raises(errors.InvalidRequestError, match="Not a number of type LONG"):
        validate_dynamic_broker_configs({"listener.name.plaintext.sasl.kerberos.min.time.before.relogin": "soon"})
    with pytest.raises(errors.InvalidRequestError, match=r"only per-listener .*: Set\(ssl.keystore.location\)$"):
        validate_dynamic_broker_configs({"ssl.keystore.location": "/x"})
    with pytest.raises(
        errors.InvalidRequestError,
        match=r"^Cannot update these configs at default cluster level, broker id must be specified: "
        r"Set\(listener.name.plaintext.ssl.keystore.location, sasl.kerberos.min.time.before.relogin\)$",
    ):
        validate_dynamic_broker_configs(
            {
                "sasl.kerberos.min.time.before.relogin": "1",
                "listener.name.plaintext.ssl.keystore.location": "/x",
                "num.network.threads": "4",
            },
            per_broker=False,
        )


def test_running_broker_follows_its_dynamic_configs(tmp_path):
    with EmbeddedKafka(str(tmp_path), config={"num.io.threads": "4"}) as kafka:
        server = kafka._server.broker
        assert len(server.data_plane_pool.handlers) == 4
        _alter(kafka.bootstrap_servers, "1", "num.io.threads", "6")
        wait_until(lambda: len(server.data_plane_pool.handlers) == 6, 10, message="pool grown")
        _alter(kafka.bootstrap_servers, "", "num.io.threads", "3")  # the per-broker value still wins
        _alter(kafka.bootstrap_servers, "1", "num.io.threads", None)  # now the cluster default: 3
        wait_until(lambda: len(server.data_plane_pool.handlers) == 3, 10, message="pool shrunk")
        assert sum(h.is_alive() for h in server.data_plane_pool.handlers) == 3
        kafka.create_topic("dyn", partitions=1)
        # CreateTopics answers once the controller committed the topic; the broker creates the log after (as Kafka's)
        log = wait_until(lambda: server.log_manager.get_log("dyn", 0), 10, message="the log of dyn-0 created")
        assert log.config.retention_ms == 604_800_000
        _alter(kafka.bootstrap_servers, "", "log.retention.ms", "60000")
        wait_until(lambda: log.config.retention_ms == 60000, 10, message="topic default applied")
        _alter(kafka.bootstrap_servers, "", "max.connections.per.ip", "50")
        wait_until(lambda: server.socket_server.connection_quotas.default_max_per_ip == 50, 10, message="quota")
        # KIP-612 creation rates: broker-wide, and a listener's own beating it for that listener
        quotas = server.socket_server.connection_quotas
        _alter(kafka.bootstrap_servers, "", "max.connection.creation.rate", "500")
        wait_until(lambda: quotas.broker_rate.limit == 500, 10, message="broker rate")
        assert quotas.listener_rates["PLAINTEXT"].limit == 500  # the listener follows the broker-wide value
        _alter(kafka.bootstrap_servers, "", "listener.name.plaintext.max.connection.creation.rate", "300")
        wait_until(lambda: quotas.listener_rates["PLAINTEXT"].limit == 300, 10, message="listener rate")
        assert quotas.broker_rate.limit == 500
        # Kafka's resizeRecoveryThreadPool: the LogManager's threads per log dir closing the logs at shutdown
        assert server.log_manager.num_recovery_threads_per_data_dir == 1
        _alter(kafka.bootstrap_servers, "", "num.recovery.threads.per.data.dir", "2")
        wait_until(lambda: server.log_manager.num_recovery_threads_per_data_dir == 2, 10, message="recovery threads")


def test_running_broker_checks_of_a_change():
    """DynamicBrokerConfig.validate (ConfigAdminManager.preprocess on the receiving broker): Kafka's thread count
    bounds and listener rules, refused with Kafka's wrapped message."""
    from pykbroker.config.kafka_config import KafkaConfig
    from pykbroker.server.dynamic_broker_config import DynamicBrokerConfig

    config = KafkaConfig(
        {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": "/nonexistent",
        }
    )
    dynamic = DynamicBrokerConfig(1, config)
    wrapped = (
        "Invalid value org.apache.kafka.common.config.ConfigException: {} "
        "for configuration Invalid dynamic configuration"
    )
    dynamic.validate({"num.io.threads": "4", "sasl.kerberos.min.time.before.relogin": "1"}, True)  # 8 -> 4: half
    for props, reason in [
        (
            {"num.io.threads": "3"},
            "Dynamic thread count update validation failed for num.io.threads=3, value should "
            "be at least half the current value 8",
        ),
        (
            {"num.replica.fetchers": "3"},
            "Dynamic thread count update validation failed for num.replica.fetchers=3, "
            "value should not be greater than double the current value 1",
        ),
        (
            {"advertised.listeners": "PLAINTEXT://example:9092"},
            "Advertised listeners cannot be altered when using a Raft-based metadata quorum.",
        ),
        (
            {"listener.security.protocol.map": "PLAINTEXT:SSL,CONTROLLER:PLAINTEXT"},
            "Security protocol cannot be updated for existing listener PLAINTEXT",
        ),
        ({"max.connection.creation.rate": "0"}, "Invalid max.connection.creation.rate 0"),
        ({"listener.name.plaintext.max.connection.creation.rate": "0"}, "Invalid max.connection.creation.rate 0"),
        ({"max.connections": "0"}, "Invalid max.connections 0"),
    ]:
        with pytest.raises(errors.InvalidRequestError) as refused:
            dynamic.validate(props, True)
        assert refused.value.message == wrapped.format(reason)
