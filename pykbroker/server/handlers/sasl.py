"""SaslHandshake (17) and SaslAuthenticate (36) reaching KafkaApis, and the error responses of the security
APIs. On a SASL listener the network thread's
SaslServerAuthenticator answers them before authentication, so here they come on a PLAINTEXT listener or an
already authenticated connection; Kafka answers ILLEGAL_SASL_STATE ("Handshake request not expected at this
point" / "SaslAuthenticate request received after successful authentication")."""

from __future__ import annotations

from pykbroker.protocol import errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server import error_responses


class SaslHandlers:
    def __init__(self, helper):
        self.helper = helper

    def handlers(self) -> dict:
        return {
            ApiKeys.SASL_HANDSHAKE: self.handle_sasl_handshake_request,
            ApiKeys.SASL_AUTHENTICATE: self.handle_sasl_authenticate_request,
        }

    def handle_sasl_handshake_request(self, request) -> None:
        self.helper.send_response(request, {"error_code": errors.ILLEGAL_SASL_STATE, "mechanisms": []})

    def handle_sasl_authenticate_request(self, request) -> None:
        self.helper.send_response(
            request,
            {
                "error_code": errors.ILLEGAL_SASL_STATE,
                "error_message": "SaslAuthenticate request received after successful authentication",
                "auth_bytes": b"",
                "session_lifetime_ms": 0,
            },
        )


@error_responses.register(ApiKeys.SASL_HANDSHAKE)
def _sasl_handshake_error(version, body, code, message):
    return {"error_code": code, "mechanisms": []}


@error_responses.register(ApiKeys.SASL_AUTHENTICATE)
def _sasl_authenticate_error(version, body, code, message):
    return {"error_code": code, "error_message": message, "auth_bytes": b"", "session_lifetime_ms": 0}


@error_responses.register(ApiKeys.DESCRIBE_USER_SCRAM_CREDENTIALS)
def _describe_scram_error(version, body, code, message):
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "results": []}


@error_responses.register(ApiKeys.ALTER_USER_SCRAM_CREDENTIALS)
def _alter_scram_error(version, body, code, message):
    users = dict.fromkeys([d["name"] for d in body["deletions"]] + [u["name"] for u in body["upsertions"]])
    return {
        "throttle_time_ms": 0,
        "results": [{"user": u, "error_code": code, "error_message": message} for u in users],
    }


@error_responses.register(ApiKeys.DESCRIBE_ACLS)
def _describe_acls_error(version, body, code, message):
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "resources": []}


@error_responses.register(ApiKeys.CREATE_ACLS)
def _create_acls_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "results": [{"error_code": code, "error_message": message} for _ in body["creations"]],
    }


@error_responses.register(ApiKeys.DELETE_ACLS)
def _delete_acls_error(version, body, code, message):
    return {
        "throttle_time_ms": 0,
        "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []} for _ in body["filters"]
        ],
    }
