"""Security keys: Kafka's ``BrokerSecurityConfigs`` (SASL mechanisms, re-authentication) and the
authorizer's (authorizer.class.name, super.users, allow.everyone.if.no.acl.found).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import L, M
from pykbroker.config.config_def import ConfigDef, Type, at_least

SECURITY_CONFIG_DEF = (
    ConfigDef()
    .define(
        "connections.max.reauth.ms",
        Type.LONG,
        0,
        None,
        M,
        "Maximum session lifetime in ms of a SASL-authenticated connection (KIP-368, 0: no expiry); sent to "
        "clients as SaslAuthenticate session_lifetime_ms, which must re-authenticate on the connection before "
        "it ends or are closed at their next request; also per listener and mechanism: "
        "listener.name.<listener>.<mechanism>.connections.max.reauth.ms.",
    )
    .define(
        "authorizer.class.name",
        Type.STRING,
        "",
        None,
        L,
        "Class of the authorizer of requests (empty: no authorization): "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the metadata log).",
    )
    .define(
        "super.users",
        Type.STRING,
        "",
        None,
        L,
        "Principals allowed everything by the StandardAuthorizer, separated by semicolons (User:admin;User:ops).",
    )
    .define(
        "allow.everyone.if.no.acl.found",
        Type.BOOLEAN,
        False,
        None,
        L,
        "Whether the StandardAuthorizer allows access to resources no ACL applies to.",
    )
    .define(
        "sasl.enabled.mechanisms",
        Type.LIST,
        "GSSAPI",
        None,
        M,
        "SASL mechanisms enabled on the server's SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 are "
        "supported; per listener: listener.name.<listener>.sasl.enabled.mechanisms).",
    )
    .define(
        "sasl.server.max.receive.size",
        Type.INT,
        524288,
        at_least(1),
        L,
        "Largest SASL frame in bytes accepted before a connection is authenticated.",
    )
    .define(
        "sasl.mechanism.inter.broker.protocol",
        Type.STRING,
        "GSSAPI",
        None,
        M,
        "SASL mechanism of this broker's connections to other brokers when the inter-broker listener is "
        "SASL_PLAINTEXT or SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; credentials from the username and "
        "password of listener.name.<listener>.<mechanism>.sasl.jaas.config).",
    )
)
