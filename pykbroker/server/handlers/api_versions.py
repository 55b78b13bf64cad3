"""ApiVersions (key 18): the advertised (api key, min, max) table and the features (KIP-584).

Mirrors ``KafkaApis.handleApiVersionsRequest`` (+ KIP-511): a version above what we support is
answered as v0 with UNSUPPORTED_VERSION (35) and the full ``api_keys`` list, with a v0 response header,
so the client can retry with a supported version; invalid client software name/version (v3+) gets
INVALID_REQUEST (42).

v3+ carries the features (``ApiVersionsResponse.Builder``): ``supported_features``, the ranges this software
supports (:data:`pykbroker.metadata.features.SUPPORTED_FEATURES`; below v4 those whose minimum is 0 are left
out, KAFKA-17492), ``finalized_features`` (each level other than 0, as min and max) and
``finalized_features_epoch`` from the node's features provider (see :mod:`pykbroker.metadata.features_publisher`).
Responses are encoded once per (version, finalized features epoch).
"""

from __future__ import annotations

import re

from pykbroker.metadata.features import KRAFT_VERSION, SUPPORTED_FEATURES
from pykbroker.metadata.features_publisher import UNKNOWN_FEATURES, FinalizedFeatures
from pykbroker.protocol import encode_response_body, errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server import error_responses

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def feature_keys(version: int, finalized: FinalizedFeatures) -> dict:
    """The three feature fields of an ApiVersions response at ``version``."""
    return {
        "supported_features": [
            {"name": name, "min_version": lo, "max_version": hi}
            for name, (lo, hi) in sorted(SUPPORTED_FEATURES.items())
            if version >= 4 or lo != 0
        ],
        "finalized_features_epoch": finalized.epoch,
        "finalized_features": [
            {"name": name, "max_version_level": level, "min_version_level": level}
            for name, level in sorted(finalized.levels.items())
            if level != 0
        ],
    }


class ApiVersionsHandler:
    """``features()`` -> the node's :class:`FinalizedFeatures` (any thread)."""

    def __init__(self, helper, api_version_manager=None, features=lambda: UNKNOWN_FEATURES):
        self.helper = helper
        self.manager = api_version_manager  # set once every other handler family is registered
        self.features = features
        # The manager is read-only once set: its list, and the successful response per version for the current
        # features epoch, are built once (replaced whole, by reference: racing handler threads store equal bytes).
        self._api_keys: list[dict] | None = None
        self._encoded: tuple[tuple[int, int], dict[int, tuple[bytes, dict]]] = ((-2, 0), {})

    def handlers(self) -> dict:
        return {ApiKeys.API_VERSIONS: self.handle_api_versions_request}

    def handle_api_versions_request(self, request) -> None:
        api_keys = self._api_keys
        if api_keys is None:
            api_keys = self._api_keys = self.manager.api_versions()
        if request.unsupported_version:
            self.helper.send_response(
                request,
                {"error_code": errors.UNSUPPORTED_VERSION, "api_keys": api_keys, "throttle_time_ms": 0},
                version=0,
            )
            return
        body = request.body
        version = request.context.api_version
        if version >= 3:
            name, ver = body.get("client_software_name") or "", body.get("client_software_version") or ""
            if not (_SOFTWARE.match(name) and _SOFTWARE.match(ver)):
                self.helper.send_response(
                    request, {"error_code": errors.INVALID_REQUEST, "api_keys": api_keys, "throttle_time_ms": 0}
                )
                return
        finalized = self.features()
        key = (finalized.epoch, finalized.levels.get(KRAFT_VERSION, 0))  # kraft.version changes in the Raft log
        cached_key, by_version = self._encoded
        if cached_key != key:
            by_version = {}
            self._encoded = (key, by_version)
        cached = by_version.get(version)
        if cached is None:  # the same for every request of a version until the features change: encode it once
            body = {
                "error_code": errors.NONE,
                "api_keys": api_keys,
                "throttle_time_ms": 0,
                **feature_keys(version, finalized),
                "zk_migration_ready": False,
            }
            cached = by_version[version] = (encode_response_body(ApiKeys.API_VERSIONS, version, body), body)
        # the body goes along for a request quota's throttle_time_ms (then encoded again)
        self.helper.send_encoded_response(request, cached[0], body=cached[1])


@error_responses.register(ApiKeys.API_VERSIONS)
def _api_versions_error(version, body, code, message):
    return {"error_code": code, "api_keys": [], "throttle_time_ms": 0}
