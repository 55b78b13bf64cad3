"""ApiVersions (key 18): the advertised (api key, min, max) table.

Mirrors ``KafkaApis.handleApiVersionsRequest`` (+ KIP-511): a version above what we support is
answered as v0 with UNSUPPORTED_VERSION (35) and the full ``api_keys`` list, with a v0 response header,
so the client can retry with a supported version; invalid client software name/version (v3+) gets
INVALID_REQUEST (42).
"""

from __future__ import annotations

import re

from pykbroker.protocol import encode_response_body, errors
from pykbroker.protocol.api_keys import ApiKeys
from pykbroker.server import error_responses

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


class ApiVersionsHandler:
    def __init__(self, helper, api_version_manager=None):
        self.helper = helper
        self.manager = api_version_manager  # set once every other handler family is registered
        # The manager is read-only once set: its list, and the successful response per version, are built once
        # (a plain dict: two handler threads racing to fill an entry store equal bytes).
        self._api_keys: list[dict] | None = None
        self._encoded: dict[int, bytes] = {}

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
        encoded = self._encoded.get(version)
        if encoded is None:  # the answer is the same for every request of a version: encode it once
            body = {
                "error_code": errors.NONE,
                "api_keys": api_keys,
                "throttle_time_ms": 0,
                "supported_features": [],
                "finalized_features_epoch": -1,
                "finalized_features": [],
                "zk_migration_ready": False,
            }
            encoded = self._encoded[version] = encode_response_body(ApiKeys.API_VERSIONS, version, body)
        self.helper.send_encoded_response(request, encoded)


@error_responses.register(ApiKeys.API_VERSIONS)
def _api_versions_error(version, body, code, message):
    return {"error_code": code, "api_keys": [], "throttle_time_ms": 0}
