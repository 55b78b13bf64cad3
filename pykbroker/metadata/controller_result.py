"""What a controller operation returns (Kafka's ``ControllerResult``): records to append and the
response to hand back once they are committed. ``atomic`` results are appended as one batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from pykbroker.metadata.records import ApiMessageAndVersion

R = TypeVar("R")


@dataclass
class ControllerResult(Generic[R]):
    records: list[ApiMessageAndVersion] = field(default_factory=list)
    response: R | None = None
    atomic: bool = True

    @classmethod
    def of(cls, records: list[ApiMessageAndVersion], response: R) -> ControllerResult[R]:
        return cls(list(records), response, True)


class MutationQuota(Protocol):
    """A request's controller mutation quota (KIP-599; server/quotas' ControllerMutationQuota): ``record(permits)``
    counts topic/partition mutations and raises ThrottlingQuotaExceededError once a strict quota is exceeded."""

    def record(self, permits: float) -> None: ...


def api_error(code: int, message: str | None = None) -> dict:
    """An ``{error_code, error_message}`` pair, as Kafka's ``ApiError``."""
    return {"error_code": code, "error_message": message}
