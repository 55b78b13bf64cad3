"""ScramControlManager: SCRAM credentials in the metadata log (Kafka's ``ScramControlManager``, KIP-554).

AlterUserScramCredentials carries, per upsertion, the user, mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512),
iterations, salt and *salted password* (the client ran PBKDF2); the controller derives StoredKey and
ServerKey and writes a ``UserScramCredentialRecord``; a deletion writes a
``RemoveUserScramCredentialRecord``. Errors per user, with Kafka's messages: UNSUPPORTED_SASL_MECHANISM,
UNACCEPTABLE_CREDENTIAL (empty user, iterations outside [4096, 16384], empty salt or salted password),
DUPLICATE_RESOURCE (one user twice in a request), RESOURCE_NOT_FOUND (deleting a credential that does not exist),
UNSUPPORTED_VERSION while ``metadata.version`` is below 3.5-IV2 (no SCRAM records before it).

Not thread-safe: used on the controller's event thread.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any

from pykbroker.metadata.controller_result import ControllerResult
from pykbroker.metadata.features import IBP_3_5_IV2
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
    def __init__(self, metadata_version: Callable[[], int | None] = lambda: None) -> None:
        self.credentials: dict[tuple[str, int], int] = {}  # (user, mechanism) -> iterations
        self.metadata_version = metadata_version

    def _scram_supported(self) -> bool:
        """Kafka's ``MetadataVersion.isScramSupported`` (3.5-IV2 and later)."""
        mv = self.metadata_version()
        return mv is None or mv >= IBP_3_5_IV2

    def replay(self, record: ApiMessageAndVersion) -> None:
        d = record.data
        if record.name == USER_SCRAM_CREDENTIAL_RECORD:
            self.credentials[(d["name"], d["mechanism"])] = d["iterations"]
        elif record.name == REMOVE_USER_SCRAM_CREDENTIAL_RECORD:
            self.credentials.pop((d["name"], d["mechanism"]), None)

    def alter_credentials(self, request: dict[str, Any]) -> ControllerResult[dict]:
        """Kafka's rules: a user may appear once per request (DUPLICATE_RESOURCE otherwise)."""
        to_delete: dict[str, dict] = {}
        to_upsert: dict[str, dict] = {}
        user_errors: dict[str, tuple[int, str]] = {}
        duplicate = (errors.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        unsupported = (errors.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM")
        scram_supported = self._scram_supported()
        for d in request.get("deletions") or []:
            user = d["name"]
            if user in user_errors:
                continue
            if to_delete.pop(user, None) is not None:
                user_errors[user] = duplicate
            elif not scram_supported:
                user_errors[user] = unsupported
            elif d["mechanism"] not in HASHES:
                user_errors[user] = (errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif (user, d["mechanism"]) not in self.credentials:
                user_errors[user] = (
                    errors.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
            else:
                to_delete[user] = d
        for u in request.get("upsertions") or []:
            user = u["name"]
            if user in user_errors:
                continue
            if to_delete.pop(user, None) is not None or to_upsert.pop(user, None) is not None:
                user_errors[user] = duplicate
            elif not scram_supported:
                user_errors[user] = unsupported
            elif u["mechanism"] not in HASHES:
                user_errors[user] = (errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
            elif not user:
                user_errors[user] = (errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
            elif not MIN_ITERATIONS <= u["iterations"] <= MAX_ITERATIONS:
                message = "Too few iterations" if u["iterations"] < MIN_ITERATIONS else "Too many iterations"
                user_errors[user] = (errors.UNACCEPTABLE_CREDENTIAL, message)
            elif not u["salt"] or not u["salted_password"]:
                user_errors[user] = (errors.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
            else:
                to_upsert[user] = u
        records: list[ApiMessageAndVersion] = []
        results = []
        for user, d in to_delete.items():
            records.append(remove_user_scram_credential_record(user, d["mechanism"]))
            results.append({"user": user, "error_code": errors.NONE, "error_message": None})
        for user, u in to_upsert.items():
            stored, server = keys_from_salted_password(u["mechanism"], bytes(u["salted_password"]))
            records.append(
                user_scram_credential_record(user, u["mechanism"], bytes(u["salt"]), stored, server, u["iterations"])
            )
            results.append({"user": user, "error_code": errors.NONE, "error_message": None})
        for user, (code, message) in user_errors.items():
            results.append({"user": user, "error_code": code, "error_message": message})
        return ControllerResult(records, {"throttle_time_ms": 0, "results": results})
