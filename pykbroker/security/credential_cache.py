"""ScramCredentialCache: the SCRAM credentials a broker authenticates with (Kafka's ``CredentialCache``).

Filled from the metadata log's UserScramCredentialRecords by the metadata publisher
(:meth:`update_from_image`); looked up by the SCRAM servers of the network threads.

Threading: :meth:`lookup` reads a dict that :meth:`update_from_image` replaces whole (atomic swap).
"""

from __future__ import annotations

from pykbroker.security.scram import MECHANISM_BY_TYPE, ScramCredential


class ScramCredentialCache:
    def __init__(self):
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def replace(self, credentials: dict[tuple[str, str], ScramCredential]) -> None:
        self._credentials = dict(credentials)

    def update_from_image(self, image) -> None:
        """Take every credential of a metadata image (``image.scram``: (user, mechanism type) -> fields)."""
        self.replace(
            {
                (user, MECHANISM_BY_TYPE[mech]): ScramCredential(*fields)
                for (user, mech), fields in image.scram.items()
                if mech in MECHANISM_BY_TYPE
            }
        )
