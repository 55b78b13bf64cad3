"""ScramControlManager: SCRAM credentials in the metadata log (Kafka's ``ScramControlManager``, KIP-554).

AlterUserScramCredentials carries, per upsertion, the user, mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512),
iterations, salt and *salted password* (the client ran PBKDF2); the controller derives StoredKey and
ServerKey and writes a ``UserScramCredentialRecord``; a deletion writes a
``RemoveUserScramCredentialRecord``. Errors per user, with Kafka's messages: UNSUPPORTED_SASL_MECHANISM,
UNACCEPTABLE_CREDENTIAL (empty user, iterations outside [4096, 16384], empty salt or salted password),
DUPLICATE_RESOURCE (one user twice in a request), RESOURCE_NOT_FOUND (deleting a credential that does not exist).

Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from pykbroker.metadata.controller_result import ControllerResult
from pykbroker.metadata.records import (
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD,
    USER_SCRAM_CREDENTIAL_RECORD,
    ApiMessageAndVersion,
    remove_user_scram_credential_record,
    user_scram_credential_record,
)
from pykbroker.protocol import errors

HASHES = {1: "sha256", 2: "sha512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


def keys_from_salted_password(mechanism: int, salted_password: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) of RFC 5802 from a salted password."""
    h = HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", h).digest()
    return hashlib.new(h, client_key).digest(), hmac.new(salted_password, b"Server Key", h).digest()


class ScramControlManager:
    def __init__(self) -> None:
        self.credentials: dict[tuple[str, int], int] = {}  # (user, mechanism) -> iterations

    def replay(self, record: ApiMessageAndVersion) -> None:
        d = record.data
        if record.name == USER_SCRAM_CREDENTIAL_RECORD:
            self.credentials[(d["name"], d["mechanism"])] = d["iterations"]
        elif record.name == REMOVE_USER_SCRAM_CREDENTIAL_RECORD:
            self.credentials.pop((d["name"], d["mechanism"]), None)

    def alter_credentials(self, request: dict[str, Any]) -> ControllerResult[dict]:
        deletions, upsertions = request.get("deletions") or [], request.get("upsertions") or []
        users = [d["name"] for d in deletions] + [u["name"] for u in upsertions]
        duplicates = {u for u in users if users.count(u) > 1}
        results: dict[str, tuple[int, str | None]] = {}
        records: list[ApiMessageAndVersion] = []
        for user in duplicates:
            results[user] = (errors.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        for d in deletions:
            user, mech = d["name"], d["mechanism"]
            if user in results:
                continue
            if mech not in HASHES:
                results[user] = (errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif (user, mech) not in self.credentials:
                results[user] = (errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
            else:
                records.append(remove_user_scram_credential_record(user, mech))
                results[user] = (errors.NONE, None)
        for u in upsertions:
            user, mech = u["name"], u["mechanism"]
            if user in results:
                continue
            if mech not in HASHES:
                results[user] = (errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif not user:
                results[user] = (errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            elif not MIN_ITERATIONS <= u["iterations"] <= MAX_ITERATIONS:
                message = "Too few iterations" if u["iterations"] < MIN_ITERATIONS else "Too many iterations"
                results[user] = (errors.UNACCEPTABLE_CREDENTIAL, message)
            elif not u["salt"] or not u["salted_password"]:
                results[user] = (errors.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
            else:
                stored, server = keys_from_salted_password(mech, bytes(u["salted_password"]))
                records.append(
                    user_scram_credential_record(user, mech, bytes(u["salt"]), stored, server, u["iterations"])
                )
                results[user] = (errors.NONE, None)
        response = {
            "throttle_time_ms": 0,
            "results": [{"user": user, "error_code": c, "error_message": m} for user, (c, m) in results.items()],
        }
        return ControllerResult(records, response)
