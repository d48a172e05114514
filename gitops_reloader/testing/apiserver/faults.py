"""Scripted failures: answer matching requests with an error status and/or a delay.

A ``Fault`` is plain data. The ``FaultBook`` checks faults in the order they were
added; the first one matching a request is consumed (``times`` counts down, ``None``
means forever) and applied. Thread-safe: any number of handler threads may match while
tests add or clear faults.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from .status import REASONS, ApiError, conflict, not_found

__all__ = ["Fault", "FaultBook"]


@dataclass(frozen=True, slots=True)
class Fault:
    """Answer the next ``times`` requests matching verb/resource/namespace/name.

    ``verb`` is one of get, list, watch, create, update, patch, delete,
    deletecollection or ``*``; ``resource`` is a plural (``deployments``, or
    ``deployments/status`` for the subresource) or ``*``. ``status`` ``None`` with a
    ``latency`` only delays the request. A 429 carries ``Retry-After`` (``retry_after``,
    default 1 s; text such as ``inf`` or an HTTP date is sent as it stands, as a proxy in
    between might). A 410 on a watch arrives as an ERROR event in a 200 stream, like
    the real server's "too old resource version". ``label_selector`` (exact text) picks
    one client's list or watch among several, e.g. one shard's ``--namespace-selector``;
    ``field_manager`` one client's writes among several.
    """

    verb: str
    resource: str
    status: int | None
    times: int | None = 1
    namespace: str | None = None
    name: str | None = None
    latency: float = 0.0
    retry_after: int | str | None = None
    message: str | None = None
    label_selector: str | None = None
    field_manager: str | None = None
    """Only writes made with this ``fieldManager`` (one client among several)."""

    def matches(self, verb: str, resource: str, namespace: str, name: str,
                label_selector: str = "", field_manager: str = "") -> bool:
        """Whether this fault applies to the request."""
        return (
            self.verb in ("*", verb)
            and self.resource in ("*", resource)
            and (self.namespace is None or self.namespace == namespace)
            and (self.name is None or self.name == name)
            and (self.label_selector is None or self.label_selector == label_selector)
            and (self.field_manager is None or self.field_manager == field_manager)
        )

    def error(self, *, plural: str, group: str, name: str, current_rv: int) -> ApiError:
        """The ``ApiError`` this fault answers with (``status`` must be set)."""
        code = self.status
        assert code is not None
        msg = self.message
        details: dict[str, Any] = {"name": name, "kind": plural} if name else {"kind": plural}
        if group:
            details = (
                {"name": name, "group": group, "kind": plural} if name else {"group": group, "kind": plural}
            )
        headers: tuple[tuple[str, str], ...] = ()
        if self.retry_after is not None or code == 429:
            seconds = self.retry_after if self.retry_after is not None else 1
            headers = (("Retry-After", str(seconds)),)
            if isinstance(seconds, int):  # a text value is a misbehaving proxy's, not the server's
                details["retryAfterSeconds"] = seconds
        if code == 404 and msg is None:
            return not_found(plural, group, name)
        if code == 409 and msg is None and name:
            return conflict(plural, group, name)
        if msg is None:
            msg = {
                409: "Operation cannot be fulfilled: the object has been modified",
                410: f"too old resource version: {max(current_rv - 1, 0)} ({current_rv})",
                429: "Too many requests, please try again later.",
                500: "Internal error occurred: injected fault",
                503: "the server is currently unable to handle the request",
                504: "the server was unable to return a response in the time allotted",
            }.get(code, f"injected fault ({code})")
        if code == 500:
            details["causes"] = [{"message": "injected fault"}]
        return ApiError(code, msg, reason=REASONS.get(code, ""), details=details, headers=headers)


class FaultBook:
    """The active faults, consumed in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[list[Any]] = []  # [fault, remaining]

    def add(self, fault: Fault) -> None:
        """Append a fault (checked after those added before it)."""
        if fault.times is not None and fault.times < 1:
            raise ValueError("Fault.times must be at least 1, or None for forever")
        with self._lock:
            self._faults.append([fault, fault.times])

    def clear(self) -> None:
        """Remove every fault."""
        with self._lock:
            self._faults.clear()

    def take(self, verb: str, resource: str, namespace: str, name: str,
             label_selector: str = "", field_manager: str = "") -> Fault | None:
        """Consume and return the first fault matching the request, if any."""
        with self._lock:
            if not self._faults:
                return None
            for i, entry in enumerate(self._faults):
                fault: Fault = entry[0]
                if fault.matches(verb, resource, namespace, name, label_selector, field_manager):
                    if entry[1] is not None:
                        entry[1] -= 1
                        if entry[1] <= 0:
                            del self._faults[i]
                    return fault
            return None

    def pending(self) -> list[Fault]:
        """The faults still active, in order."""
        with self._lock:
            return [entry[0] for entry in self._faults]
