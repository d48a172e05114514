"""Maintenance windows: when a workload may be reloaded (``--reload-windows-config``).

A window is a cron schedule in an IANA time zone and a duration: it opens at each time the
schedule names and stays open that long (elapsed time: a 6 h window that spans a daylight
saving change still lasts 6 hours). The file names the windows and may choose a default::

    windows:
      - name: weeknights
        schedule: "0 22 * * 1-5"      # cron: minute hour day-of-month month day-of-week
        timeZone: Europe/Berlin
        duration: 6h
      - name: sunday-morning
        schedule: "0 6 * * 0"
        timeZone: America/New_York
        duration: 2h
    default: weeknights               # optional: the window of every workload without one

A workload chooses one with the annotation ``gitops-reloader.io/reload-window: <name>``;
``none`` opts it out of the default. Cron is parsed by ``cronsim`` (Debian cron's rules,
daylight saving included: a start in the skipped hour runs at the first minute after it, a
start in the repeated hour runs once). Everything here is pure: times are passed in.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from cronsim import CronSim, CronSimError

from gitops_reloader.durations import parse_duration
from gitops_reloader.errors import ConfigError

__all__ = ["NO_WINDOW", "ReloadWindow", "WindowSet", "choose_window", "load_windows", "parse_windows"]

NO_WINDOW = "none"
"""The annotation value that opts a workload out of the default window."""
_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_MAX_FILE = 256 * 1024
_MAX_WINDOWS = 256


@dataclass(frozen=True, slots=True)
class ReloadWindow:
    """One named window: opens at each ``schedule`` time in ``time_zone``, for ``duration`` seconds."""

    name: str
    schedule: str
    time_zone: str
    duration: float

    def opens_in(self, now: float) -> float:
        """Seconds until the window is open at ``now`` (epoch seconds): 0 when it is open."""
        # The first start after ``now - duration``: at or before ``now``, the window is open;
        # otherwise it is the next opening. Forward from an instant, so a repeated hour (its
        # wall times seen twice) is never taken for a second start, and a skipped one is not lost.
        # cronsim works on wall times: from inside a repeated hour it may name the hour's first
        # pass again, which lies before ``since``; such a start is skipped.
        zone = ZoneInfo(self.time_zone)
        since = now - self.duration
        for moment in CronSim(self.schedule, _dt.datetime.fromtimestamp(since, zone)):
            start = moment.timestamp()
            if start > since:
                return 0.0 if start <= now else start - now
        raise AssertionError("unreachable")  # pragma: no cover - a valid schedule never ends

    def next_opening(self, now: float) -> _dt.datetime | None:
        """When the window opens next, in its time zone; ``None`` while it is open at ``now``."""
        wait = self.opens_in(now)
        return _dt.datetime.fromtimestamp(now + wait, ZoneInfo(self.time_zone)) if wait > 0 else None

    def describe(self, now: float) -> str:
        """``window W, opens at 2026-11-30 22:00 (Europe/Berlin)`` (or ``is open``) for messages."""
        opens = self.next_opening(now)
        if opens is None:
            return f"window {self.name} is open"
        return f"window {self.name}, opens at {opens:%Y-%m-%d %H:%M} ({self.time_zone})"


@dataclass(frozen=True, slots=True)
class WindowSet:
    """The configured windows and the default one."""

    windows: Mapping[str, ReloadWindow] = field(default_factory=dict)
    default: str = ""

    def for_annotation(self, value: str | None) -> ReloadWindow | None:
        """The window a workload's annotation (``None``: absent) chooses; unknown names raise
        :class:`ConfigError` naming the known ones."""
        if value is None:
            return self.windows.get(self.default) if self.default else None
        name = value.strip()
        if name == NO_WINDOW:
            return None
        window = self.windows.get(name)
        if window is None:
            known = ", ".join(sorted(self.windows)) or "none configured"
            raise ConfigError(f"no reload window named {name[:64]!r} (known: {known})")
        return window


def choose_window(windows: WindowSet, workload: str | None, namespace: str | None) -> ReloadWindow | None:
    """The window of a workload: its own ``reload-window`` annotation, else its namespace's, else
    the default (``none`` at either level opts out). An unknown name raises :class:`ConfigError`
    saying where it was written."""
    if workload is not None:
        return windows.for_annotation(workload)
    if namespace is None:
        return windows.for_annotation(None)
    try:
        return windows.for_annotation(namespace)
    except ConfigError as exc:
        raise ConfigError(f"its namespace's annotation: {exc}") from None


def parse_windows(text: str, source: str = "--reload-windows-config") -> WindowSet:
    """The :class:`WindowSet` in ``text``; :class:`ConfigError` naming the field otherwise."""
    if len(text) > _MAX_FILE:
        raise ConfigError(f"{source}: larger than {_MAX_FILE} bytes")
    try:
        top = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        raise ConfigError(f"{source}: not valid YAML") from None
    if not isinstance(top, dict) or set(top) - {"windows", "default"}:
        raise ConfigError(f"{source}: a mapping with 'windows' and an optional 'default'")
    entries = top.get("windows") or []
    if not isinstance(entries, list) or len(entries) > _MAX_WINDOWS:
        raise ConfigError(f"{source}: windows: a list of at most {_MAX_WINDOWS} windows")
    windows: dict[str, ReloadWindow] = {}
    for i, entry in enumerate(entries):
        window = _window(entry, f"{source}: windows[{i}]")
        if window.name in windows:
            raise ConfigError(f"{source}: windows[{i}].name: {window.name} is used twice")
        windows[window.name] = window
    default = top.get("default") or ""
    if default and (not isinstance(default, str) or default not in windows):
        raise ConfigError(f"{source}: default: names no window of the file")
    return WindowSet(windows, default)


def load_windows(path: str) -> WindowSet:
    """Read and parse the ``--reload-windows-config`` file."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(_MAX_FILE + 1)
    except OSError as exc:
        raise ConfigError(f"--reload-windows-config {path}: cannot read the file: {exc.strerror}") from None
    return parse_windows(text, f"--reload-windows-config {path}")


def _window(entry: Any, at: str) -> ReloadWindow:
    if not isinstance(entry, dict) or set(entry) - {"name", "schedule", "timeZone", "duration"}:
        raise ConfigError(f"{at}: a mapping with name, schedule, timeZone and duration")
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.match(name) or name == NO_WINDOW:
        raise ConfigError(f"{at}.name: lower-case letters, digits and '-' (not 'none')")
    schedule = entry.get("schedule")
    if not isinstance(schedule, str) or len(schedule) > 200:
        raise ConfigError(f"{at}.schedule: a cron expression such as '0 22 * * 1-5'")
    try:
        CronSim(schedule, _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC))
    except CronSimError as exc:
        raise ConfigError(f"{at}.schedule: {exc}") from None
    zone = entry.get("timeZone", "UTC")
    try:
        ZoneInfo(str(zone))
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"{at}.timeZone: not an IANA time zone such as Europe/Berlin") from None
    try:
        duration = parse_duration(str(entry.get("duration", "")))
    except ValueError:
        raise ConfigError(f"{at}.duration: a duration such as 6h or 90m") from None
    if not 0 < duration <= 7 * 24 * 3600:
        raise ConfigError(f"{at}.duration: between 1s and 168h")
    return ReloadWindow(name, schedule, str(zone), duration)

