import pytest

from pykbroker.config.config_def import ConfigException
from pykbroker.config.kafka_config import KafkaConfig

BASE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
}


def cfg(**kw):
    props = dict(BASE)
    props.update({k.replace("_", "."): v for k, v in kw.items()})
    return KafkaConfig(props)


def test_kafka_defaults():
    c = cfg()
    assert c["num.network.threads"] == 3
    assert c["num.io.threads"] == 8
    assert c["queued.max.requests"] == 500
    assert c["socket.request.max.bytes"] == 104857600
    assert c["connections.max.idle.ms"] == 600000
    assert c["max.connections.per.ip"] == 2**31 - 1
    assert c["message.max.bytes"] == 1048588
    assert c.log_retention_ms == 168 * 3600 * 1000
    assert c.log_dirs == ["/tmp/kafka-logs"]


def test_planes_in_kraft_mode():
    c = cfg()
    assert c.control_plane_listener_name == "CONTROLLER"
    assert [e.listener_name for e in c.data_plane_listeners] == ["PLAINTEXT"]
    assert c.control_plane_listener.port == 9093
    assert [e.port for e in c.advertised_listeners] == [9092]


def test_retention_precedence():
    assert cfg(**{"log.retention.minutes": "2"}).log_retention_ms == 120000
    assert cfg(**{"log.retention.minutes": "2", "log.retention.ms": "5"}).log_retention_ms == 5


@pytest.mark.parametrize(
    "key,value,fragment",
    [
        ("num.network.threads", "zero", "Invalid value zero for configuration num.network.threads"),
        ("num.io.threads", "0", "Invalid value 0 for configuration num.io.threads"),
        ("auto.create.topics.enable", "maybe", "Invalid value maybe for configuration auto.create.topics.enable"),
        ("listeners", "PLAINTEXT:/broken", "Invalid value PLAINTEXT:/broken for configuration listeners"),
        ("log.message.timestamp.type", "Sometime", "log.message.timestamp.type"),
        ("max.connections.per.ip.overrides", "127.0.0.1", "max.connections.per.ip.overrides"),
        ("node.id", "99999999999", "node.id"),
    ],
)
def test_bad_values_name_key_and_value(key, value, fragment):
    with pytest.raises(ConfigException) as e:
        cfg(**{key: value})
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_node_id_and_roles():
    props = dict(BASE)
    del props["node.id"]
    with pytest.raises(ConfigException, match="node.id"):
        KafkaConfig(props)
    props = dict(BASE)
    del props["process.roles"]
    with pytest.raises(ConfigException, match="process.roles"):
        KafkaConfig(props)


def test_unknown_keys_are_reported_not_fatal():
    c = cfg(**{"no.such.key": "1", "listener.name.plaintext.foo": "x"})
    assert c.unknown_keys == ["no.such.key"]


def test_overrides_parsing():
    c = cfg(**{"max.connections.per.ip.overrides": "127.0.0.1:5,hostA:7"})
    assert c.max_connections_per_ip_overrides == {"127.0.0.1": 5, "hostA": 7}
