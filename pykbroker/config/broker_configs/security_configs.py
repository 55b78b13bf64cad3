"""Security keys: Kafka's ``BrokerSecurityConfigs`` (SASL mechanisms, re-authentication, delegation
tokens) and the authorizer's (authorizer.class.name, super.users, allow.everyone.if.no.acl.found).

Part of the broker's ConfigDef (:data:`pykbroker.config.kafka_config_def.BROKER_CONFIG_DEF`, the merge of
these per-area ConfigDefs, as Kafka's ``AbstractKafkaConfig.CONFIG_DEF``). Every key has a one-sentence doc with its
unit; keys that pykbroker accepts for compatibility but does not act on yet say so in their doc.
"""

from __future__ import annotations

from pykbroker.config.broker_configs.common import L, M
from pykbroker.config.config_def import ConfigDef, Type, at_least

# The key names (Kafka's ``*_CONFIG`` constants), each named after its key (``log.retention.ms`` ->
# ``LOG_RETENTION_MS_CONFIG``): the one spelling of each key, imported by the code that reads it.
CONNECTIONS_MAX_REAUTH_MS_CONFIG = "connections.max.reauth.ms"
AUTHORIZER_CLASS_NAME_CONFIG = "authorizer.class.name"
SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG = "allow.everyone.if.no.acl.found"
SASL_ENABLED_MECHANISMS_CONFIG = "sasl.enabled.mechanisms"
SASL_SERVER_MAX_RECEIVE_SIZE_CONFIG = "sasl.server.max.receive.size"
SASL_MECHANISM_INTER_BROKER_PROTOCOL_CONFIG = "sasl.mechanism.inter.broker.protocol"
SASL_LOGIN_CALLBACK_HANDLER_CLASS_CONFIG = "sasl.login.callback.handler.class"
SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS_CONFIG = "sasl.oauthbearer.clock.skew.seconds"
SASL_OAUTHBEARER_EXPECTED_AUDIENCE_CONFIG = "sasl.oauthbearer.expected.audience"
SASL_OAUTHBEARER_EXPECTED_ISSUER_CONFIG = "sasl.oauthbearer.expected.issuer"
SASL_OAUTHBEARER_HEADER_URLENCODE_CONFIG = "sasl.oauthbearer.header.urlencode"
SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS_CONFIG = "sasl.oauthbearer.jwks.endpoint.refresh.ms"
SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MAX_MS_CONFIG = "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"
SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MS_CONFIG = "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"
SASL_OAUTHBEARER_JWKS_ENDPOINT_URL_CONFIG = "sasl.oauthbearer.jwks.endpoint.url"
SASL_OAUTHBEARER_SCOPE_CLAIM_NAME_CONFIG = "sasl.oauthbearer.scope.claim.name"
SASL_OAUTHBEARER_SUB_CLAIM_NAME_CONFIG = "sasl.oauthbearer.sub.claim.name"
SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL_CONFIG = "sasl.oauthbearer.token.endpoint.url"
SASL_SERVER_CALLBACK_HANDLER_CLASS_CONFIG = "sasl.server.callback.handler.class"
DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS_CONFIG = "delegation.token.expiry.check.interval.ms"
DELEGATION_TOKEN_EXPIRY_TIME_MS_CONFIG = "delegation.token.expiry.time.ms"
DELEGATION_TOKEN_MASTER_KEY_CONFIG = "delegation.token.master.key"
DELEGATION_TOKEN_MAX_LIFETIME_MS_CONFIG = "delegation.token.max.lifetime.ms"
DELEGATION_TOKEN_SECRET_KEY_CONFIG = "delegation.token.secret.key"

SECURITY_CONFIG_DEF = (
    ConfigDef()
    .define(
        CONNECTIONS_MAX_REAUTH_MS_CONFIG,
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
        DELEGATION_TOKEN_SECRET_KEY_CONFIG,
        Type.PASSWORD,
        None,
        None,
        M,
        "Secret key of delegation tokens (KIP-48): the HMAC-SHA512 key of each token's hmac, the same on every node "
        "(unset: delegation tokens are disabled, their APIs answer DELEGATION_TOKEN_AUTH_DISABLED).",
    )
    .define(
        DELEGATION_TOKEN_MASTER_KEY_CONFIG,
        Type.PASSWORD,
        None,
        None,
        L,
        "Deprecated alias of delegation.token.secret.key, used when that key is unset.",
    )
    .define(
        DELEGATION_TOKEN_MAX_LIFETIME_MS_CONFIG,
        Type.LONG,
        7 * 24 * 3600 * 1000,
        at_least(1),
        M,
        "Maximum lifetime in ms of a delegation token: it cannot be renewed past its issue time plus this.",
    )
    .define(
        DELEGATION_TOKEN_EXPIRY_TIME_MS_CONFIG,
        Type.LONG,
        24 * 3600 * 1000,
        at_least(1),
        M,
        "Validity in ms of a delegation token from its creation or renewal (the longest renew period).",
    )
    .define(
        DELEGATION_TOKEN_EXPIRY_CHECK_INTERVAL_MS_CONFIG,
        Type.LONG,
        3600 * 1000,
        at_least(1),
        L,
        "Interval in ms at which the active controller removes expired delegation tokens.",
    )
    .define(
        AUTHORIZER_CLASS_NAME_CONFIG,
        Type.STRING,
        "",
        None,
        L,
        "Class of the authorizer of requests (empty: no authorization): "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the metadata log).",
    )
    .define(
        SUPER_USERS_CONFIG,
        Type.STRING,
        "",
        None,
        L,
        "Principals allowed everything by the StandardAuthorizer, separated by semicolons (User:admin;User:ops).",
    )
    .define(
        ALLOW_EVERYONE_IF_NO_ACL_FOUND_CONFIG,
        Type.BOOLEAN,
        False,
        None,
        L,
        "Whether the StandardAuthorizer allows access to resources no ACL applies to.",
    )
    .define(
        SASL_ENABLED_MECHANISMS_CONFIG,
        Type.LIST,
        "GSSAPI",
        None,
        M,
        "SASL mechanisms enabled on the server's SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER are "
        "supported; per listener: listener.name.<listener>.sasl.enabled.mechanisms).",
    )
    .define(
        SASL_SERVER_MAX_RECEIVE_SIZE_CONFIG,
        Type.INT,
        524288,
        at_least(1),
        L,
        "Largest SASL frame in bytes accepted before a connection is authenticated.",
    )
    .define(
        SASL_MECHANISM_INTER_BROKER_PROTOCOL_CONFIG,
        Type.STRING,
        "GSSAPI",
        None,
        M,
        "SASL mechanism of this broker's connections to other brokers when the inter-broker listener is "
        "SASL_PLAINTEXT or SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; credentials from the "
        "username and password of listener.name.<listener>.<mechanism>.sasl.jaas.config, for OAUTHBEARER its "
        "unsecuredLoginStringClaim_sub or clientId and clientSecret with sasl.login.callback.handler.class).",
    )
    .define(
        SASL_SERVER_CALLBACK_HANDLER_CLASS_CONFIG,
        Type.CLASS,
        None,
        None,
        M,
        "Server callback handler of a SASL mechanism, set per listener and mechanism "
        "(listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class): for OAUTHBEARER, "
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler validates signed JWTs "
        "against sasl.oauthbearer.jwks.endpoint.url (OIDC, KIP-768); unset, unsigned JWS tokens are accepted "
        "(OAuthBearerUnsecuredValidatorCallbackHandler, for development).",
    )
    .define(
        SASL_LOGIN_CALLBACK_HANDLER_CLASS_CONFIG,
        Type.CLASS,
        None,
        None,
        M,
        "Login callback handler of this node's own SASL client, per listener and mechanism "
        "(listener.name.<listener>.oauthbearer.sasl.login.callback.handler.class): for OAUTHBEARER, "
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler gets tokens from "
        "sasl.oauthbearer.token.endpoint.url; unset, an unsecured JWS is made from the JAAS line's "
        "unsecuredLoginStringClaim_sub (OAuthBearerUnsecuredLoginCallbackHandler, for development).",
    )
    .define(
        SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL_CONFIG,
        Type.STRING,
        None,
        None,
        M,
        "URL of the OAuth/OIDC provider's token endpoint where this node gets its own OAUTHBEARER token (client "
        "credentials: clientId and clientSecret of the listener's OAuthBearerLoginModule JAAS line) when "
        "sasl.login.callback.handler.class is org.apache.kafka.common.security.oauthbearer."
        "OAuthBearerLoginCallbackHandler.",
    )
    .define(
        SASL_OAUTHBEARER_HEADER_URLENCODE_CONFIG,
        Type.BOOLEAN,
        False,
        None,
        L,
        "Whether this node URL-encodes its clientId and clientSecret in the HTTP Basic authorization header it "
        "sends to sasl.oauthbearer.token.endpoint.url (RFC 6749 2.3.1).",
    )
    .define(
        SASL_OAUTHBEARER_JWKS_ENDPOINT_URL_CONFIG,
        Type.STRING,
        None,
        None,
        M,
        "URL (http, https or file) of the OAuth/OIDC provider's JWKS (JSON Web Key Set) whose keys verify the "
        "signature of OAUTHBEARER tokens; http(s) sets are refreshed every sasl.oauthbearer.jwks.endpoint.refresh.ms "
        "and when a token names an unknown key id, a file is read once at start-up.",
    )
    .define(
        SASL_OAUTHBEARER_JWKS_ENDPOINT_REFRESH_MS_CONFIG,
        Type.LONG,
        3_600_000,
        None,
        L,
        "Time in ms between two refreshes of the JWKS (JSON Web Key Set) holding the keys that verify OAUTHBEARER "
        "token signatures.",
    )
    .define(
        SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MS_CONFIG,
        Type.LONG,
        100,
        None,
        L,
        "Initial wait in ms between two attempts to fetch the JWKS (JSON Web Key Set); it doubles after each failed "
        "attempt up to sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms.",
    )
    .define(
        SASL_OAUTHBEARER_JWKS_ENDPOINT_RETRY_BACKOFF_MAX_MS_CONFIG,
        Type.LONG,
        10_000,
        None,
        L,
        "Maximum time in ms spent retrying a fetch of the JWKS (JSON Web Key Set) from the OAuth/OIDC provider.",
    )
    .define(
        SASL_OAUTHBEARER_EXPECTED_AUDIENCE_CONFIG,
        Type.LIST,
        None,
        None,
        L,
        "Comma-separated audiences one of which an OAUTHBEARER token's aud claim must hold (unset: a token with an "
        "aud claim is refused).",
    )
    .define(
        SASL_OAUTHBEARER_EXPECTED_ISSUER_CONFIG,
        Type.STRING,
        None,
        None,
        L,
        "Issuer an OAUTHBEARER token's iss claim must equal (unset: not checked).",
    )
    .define(
        SASL_OAUTHBEARER_SUB_CLAIM_NAME_CONFIG,
        Type.STRING,
        "sub",
        None,
        L,
        "Name of the OAUTHBEARER token claim holding the principal name (the principal is User:<claim value>).",
    )
    .define(
        SASL_OAUTHBEARER_SCOPE_CLAIM_NAME_CONFIG,
        Type.STRING,
        "scope",
        None,
        L,
        "Name of the OAUTHBEARER token claim holding the scope.",
    )
    .define(
        SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS_CONFIG,
        Type.INT,
        30,
        None,
        L,
        "Difference in seconds allowed between the OAuth/OIDC provider's clock and the broker's when checking an "
        "OAUTHBEARER token's exp, iat and nbf claims.",
    )
)
