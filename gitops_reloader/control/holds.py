"""Whether a workload's reload may go now, or waits for a time: windows and storm brakes.

:class:`Holds` asks, for one workload about to be written, its maintenance window
(:mod:`gitops_reloader.windows`: closed → it waits until it opens; an unknown name → it waits
until the annotation names a window, with a Warning) and its storm brakes
(:mod:`~gitops_reloader.control.brakes`: past the workload's or the cluster's rate → it waits
until the rate allows). A wait is the entry's :class:`~gitops_reloader.ledger.Hold` in the
ledger, so it outlives a restart and :func:`~gitops_reloader.ledger.due` says when the entry
comes back; what it announces (``ReloadWaitingForWindow`` once, ``ReloadWindowOpen``,
``ReloadThrottled`` once per episode) is decided from the hold the entry had, so a restart
does not announce a wait twice. A ``reload-now`` annotation on a changed source lets one
change through closed windows, with a Normal Event naming the field manager that set it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace

from gitops_reloader.clock import Clock
from gitops_reloader.config import Config
from gitops_reloader.control.brakes import Rate, StormBrakes, parse_rate
from gitops_reloader.control.caches import OVERRIDE_MANAGER, Caches
from gitops_reloader.errors import ReloaderError
from gitops_reloader.kube.workloads import WorkloadRecord
from gitops_reloader.ledger import MAX_DETAIL_CHARS, Hold, Ledger, PendingSource, Wait
from gitops_reloader.model import ObjectRef, Outcome, OutcomeStatus, SourceRef
from gitops_reloader.observability.metrics import Metrics
from gitops_reloader.windows import ReloadWindow

__all__ = ["Holds"]

log = logging.getLogger(__name__)

Report = Callable[[WorkloadRecord, str, str], None]
"""``(workload, reason, message)``: a Normal or Warning Event on the workload (and a log line)."""


class Holds:
    """Windows and brakes for the reconciler; holds live in the ledger (thread-safe through it)."""

    def __init__(self, config: Config, caches: Caches, ledger: Ledger, *, metrics: Metrics,
                 clock: Clock, brakes: StormBrakes | None, note: Report, warn: Report) -> None:
        self.config = config
        self.caches = caches
        self.ledger = ledger
        self.metrics = metrics
        self.clock = clock
        self.brakes = brakes
        self.note = note
        self.warn = warn
        self._overrides: dict[SourceRef, tuple[str, str]] = {}
        """Source → its last ``reload-now`` value and the source version that value let through
        a window (one entry a source: a new value replaces the old one)."""
        self._admitted: dict[str, float] = {}
        """Workload key → when its storm-brake slot was reserved (given back if nothing applied)."""

    def holding(self) -> set[str]:
        """The workload keys a storm brake or a closed maintenance window holds now."""
        return {key for key, hold in self.ledger.held().items() if hold.why in (Wait.WINDOW, Wait.BRAKE)}

    def waiting_for_window(self) -> int:
        """How many workloads wait for their window (announced: a change, not a check)."""
        return sum(1 for hold in self.ledger.held(Wait.WINDOW).values() if not hold.quiet)

    def throttled(self) -> int:
        """How many workloads a storm brake holds."""
        return len(self.ledger.held(Wait.BRAKE))

    def check(self, record: WorkloadRecord, owed: Mapping[SourceRef, PendingSource]) -> bool:
        """Whether ``record`` waits now (its hold recorded); False: it may be written now, and a
        storm-brake slot is reserved for it (:meth:`released` gives it back if nothing applied)."""
        previous = self.ledger.entry(record.ref.key)
        was = previous.hold if previous is not None else None
        hold = self._window_hold(record, owed, was)
        if hold is None:
            hold = self._brake_hold(record, was)
        self.ledger.hold(record.ref.key, hold)
        return hold is not None

    def restored(self, key: str, hold: Hold | None) -> None:
        """A brake hold an earlier instance recorded: it holds ``key`` until its time — no longer
        than the longest brake period that applies to it now (a time typed far ahead, a brake
        since removed) — and this instance's brake learns it."""
        if hold is None or hold.why is not Wait.BRAKE or hold.until is None:
            return
        now = self.clock.now()
        record = self.caches.workload(ObjectRef.from_key(key))
        rates = [self.reload_rate(record) if record is not None else None,
                 self.brakes.cluster if self.brakes is not None else None]
        until = min(hold.until, now + max((r.period for r in rates if r is not None), default=0.0))
        if until != hold.until:
            self.ledger.hold(key, replace(hold, until=until))
        if self.brakes is not None and until > now:
            self.brakes.hold_until(key, hold.detail, self.clock.monotonic() + until - now)

    def needs_person(self, record: WorkloadRecord, reason: str, message: str) -> None:
        """``record``'s reload waits for a person to fix its annotation (a sink name that names
        none): held, said once a hold, asked again on an annotation change and every
        ``--retry-max-delay``."""
        key = record.ref.key
        entry = self.ledger.entry(key)
        if entry is None or entry.hold is None or entry.hold.why is not Wait.PERSON:
            self.metrics.invalid_annotation(record.ref.kind)
            self.warn(record, reason, message)
        until = self.clock.now() + self.config.runtime.retry_max_delay
        self.ledger.hold(key, Hold(Wait.PERSON, until, reason))

    def released(self, record: WorkloadRecord, outcome: Outcome | None) -> None:
        """An emission ended (``None``: it failed or waits): an applied reload keeps its storm-brake
        slot, anything else gives it back."""
        admitted = self._admitted.pop(record.ref.key, None)
        if self.brakes is not None and admitted is not None and (
                outcome is None or outcome.status is not OutcomeStatus.APPLIED):
            self.brakes.release(record.ref.key, admitted)

    # --- windows -------------------------------------------------------------------

    def _window_hold(self, record: WorkloadRecord, owed: Mapping[SourceRef, PendingSource],
                     was: Hold | None) -> Hold | None:
        if not self.config.runtime.reload_windows.windows:
            return None
        now = self.clock.now()
        quiet = all(p.resync for p in owed.values())  # a check: nothing known to have changed
        try:
            window = self.caches.reload_window(record)
        except ReloaderError as exc:  # an unknown name: hold rather than restart outside a window
            detail = str(exc)[:MAX_DETAIL_CHARS]  # names the window: a different wrong name is said again
            if was is None or was.why is not Wait.PERSON or was.detail != detail:  # said once a hold
                self.metrics.invalid_annotation(record.ref.kind)
                self.warn(record, "InvalidAnnotation", f"{self.config.keys.reload_window}: {exc}; the "
                          "reload waits until the annotation names a window")
            return Hold(Wait.PERSON, now + self.config.runtime.retry_max_delay, detail, quiet)
        wait = window.opens_in(now) if window is not None else 0.0
        if wait > 0 and not self._let_through(record, owed, window):  # type: ignore[arg-type]
            assert window is not None
            if not quiet and not _announced(was):
                message = f"waiting for {window.describe(now)}"
                self.note(record, "ReloadWaitingForWindow", message)
                log.info("reload waits for its maintenance window", extra={"object": record.ref.key,
                                                                           "detail": message})
            return Hold(Wait.WINDOW, now + wait, window.name, quiet)
        if _announced(was) and wait <= 0:
            opened = window.describe(now) if window else "no window"
            self.note(record, "ReloadWindowOpen", f"{opened}: the reload goes ahead")
        return None

    def _let_through(self, record: WorkloadRecord, owed: Mapping[SourceRef, PendingSource],
                     window: ReloadWindow) -> bool:
        """Whether a pending source carries ``reload-now``: its value lets one change through closed
        windows (every workload of that change, no later one), with a Normal Event saying who set
        it: the field manager the API server recorded, beside the value as written."""
        key = self.config.keys.reload_now
        for ref, item in owed.items():
            meta = self.caches.source(ref)
            value = meta.annotations.get(key) if meta is not None else None
            if not value:
                continue
            version = item.meta.resource_version
            used = self._overrides.get(ref)
            if used is not None and used[0] == value and used[1] != version:
                continue  # that value already let an earlier change through
            self._overrides[ref] = (value, version)
            manager = meta.annotations.get(OVERRIDE_MANAGER) or "unknown"  # type: ignore[union-attr]
            shown = "".join(ch for ch in value[:64] if ch.isprintable())
            self.note(record, "ReloadWindowOverride",
                      f"let through {window.describe(self.clock.now())}: {ref} is annotated {key}={shown!r} "
                      f"(set by field manager {manager})")
            log.info("reload let through a closed window", extra={
                "object": record.ref.key, "source": str(ref), "field_manager": manager})
            return True
        return False

    # --- storm brakes --------------------------------------------------------------

    def reload_rate(self, record: WorkloadRecord) -> Rate | None:
        """The workload's storm brake: its ``max-reloads`` annotation, else the flag's."""
        default = self.brakes.per_workload if self.brakes is not None else None
        text = record.annotations.get(self.config.keys.max_reloads)
        if text is None:
            return default
        try:
            return parse_rate(text)
        except ValueError as exc:
            self.metrics.invalid_annotation(record.ref.kind)
            self.warn(record, "InvalidAnnotation", f"{self.config.keys.max_reloads}: {exc}; using the "
                      f"default {default or 'no limit'}")
            return default

    def _brake_hold(self, record: WorkloadRecord, was: Hold | None) -> Hold | None:
        if self.brakes is None:
            return None
        rate = self.reload_rate(record)
        now = self.clock.monotonic()
        ago = self.clock.now() - record.written
        if rate is not None and record.written and 0 <= ago < rate.period:
            self.brakes.recall(record.ref.key, rate, now - ago)  # the last write, even before a restart
        wait, scope = self.brakes.admit(record.ref.key, rate, now)
        if wait <= 0:
            self._admitted[record.ref.key] = now
            return None
        if was is None or was.why is not Wait.BRAKE:
            self.metrics.reload_throttled(scope)
            limit = rate if scope == "workload" else self.brakes.cluster
            what = "this workload" if scope == "workload" else "the cluster"
            self.warn(record, "ReloadThrottled",
                      f"storm brake: {what} reached {limit} reloads; the change waits and the latest data "
                      f"is applied in {wait:.0f}s")
            log.warning("reload throttled", extra={"object": record.ref.key, "scope": scope,
                                                   "limit": str(limit), "wait": round(wait, 1)})
        return Hold(Wait.BRAKE, self.clock.now() + wait, scope)



def _announced(hold: Hold | None) -> bool:
    """Whether ``hold`` is a window wait that was announced (a change, not a quiet check)."""
    return hold is not None and hold.why is Wait.WINDOW and not hold.quiet
