"""Should this workload reload when this ConfigMap/Secret changed? Stakater's rules, pure.

:func:`decide` takes model values only and returns a :class:`Decision` with a
:class:`Reason`: no logging, no clock, no I/O. The caller logs, counts and records Events
(for example for ``Decision.invalid_patterns``).

The rules, first match wins (precedence ignore > exclude > explicit > search > auto >
auto-reload-all):

0. The source lives in another namespace than the workload → never (``OTHER_NAMESPACE``).
1. ``reloader.stakater.com/ignore`` truthy on the **source** → never (``IGNORED``).
2. The workload's exclude list for the source's type
   (``configmaps.exclude.reloader.stakater.com/reload`` / ``secrets.exclude...``: exact
   names, comma-separated, trimmed) names the source → never (``EXCLUDED``).
3. The reload list for the source's type (``configmap.reloader.stakater.com/reload`` /
   ``secret...``) has an entry that matches the whole name → reload (``EXPLICIT``). Each
   comma-separated, trimmed entry is an RE2 regex (Go ``regexp`` syntax, as Stakater's)
   anchored at both ends and matched in linear time (:mod:`gitops_reloader.regex`); an
   invalid entry (bad syntax, backreferences, lookaround, longer than
   :data:`MAX_PATTERN_CHARS`) is skipped and reported in ``invalid_patterns``; the others
   still work. This rule needs no reference in the pod spec.
4. ``reloader.stakater.com/search`` truthy on the workload and
   ``reloader.stakater.com/match`` truthy on the source → reload (``SEARCH``).
5. ``reloader.stakater.com/auto`` truthy (``AUTO``), or the typed auto for the source's type
   (``configmap.reloader.stakater.com/auto`` / ``secret...``) truthy (``TYPED_AUTO``).
6. ``--auto-reload-all`` → reload (``AUTO_RELOAD_ALL``), unless the generic or that type's
   typed auto is set to a non-empty value that is not truthy (``AUTO_DISABLED``).

Rules 4 to 6 apply only when the pod template references the source (env ``valueFrom``,
``envFrom``, volumes, projected volumes; containers or init containers); otherwise the
decision is ``NOT_REFERENCED``.

Size caps (tenant text is hostile): a reload or exclude list longer than
:data:`MAX_LIST_BYTES` UTF-8 bytes or with more than :data:`MAX_LIST_ENTRIES` entries is
ignored as if absent and its key is reported in ``Decision.oversized``. With the per-entry
cap, the work per decision is bounded whatever the annotations hold.

Workload annotations (rules 2 to 6) come from :func:`effective_annotations`: the workload's
metadata if any relevant key is there, else the pod template's (a fallback, never a merge).
"Truthy" is :func:`is_truthy` (Go's ``strconv.ParseBool``), used for every boolean
annotation: ignore, search, match, auto and typed auto.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from gitops_reloader.config import AnnotationKeys
from gitops_reloader.model import ObjectRef, PodRefs, SourceKind, SourceMeta
from gitops_reloader.regex import LinearPattern, RegexError, compile_linear

__all__ = [
    "MAX_LIST_BYTES",
    "MAX_LIST_ENTRIES",
    "MAX_PATTERN_CHARS",
    "TRUTHY_VALUES",
    "Decision",
    "PolicyOptions",
    "Reason",
    "WorkloadView",
    "choose_container",
    "decide",
    "effective_annotations",
    "has_explicit_lists",
    "is_truthy",
    "relevant_keys",
    "shown_patterns",
]

TRUTHY_VALUES = frozenset({"1", "t", "T", "true", "TRUE", "True"})
"""The spellings Go's ``strconv.ParseBool`` reads as true; exact, case and whitespace matter."""

MAX_LIST_BYTES = 4096
"""A reload or exclude list value larger than this (UTF-8 bytes) is ignored and reported."""
MAX_LIST_ENTRIES = 64
"""A reload or exclude list with more non-empty entries than this is ignored and reported."""
MAX_PATTERN_CHARS = 512
"""A reload-list entry longer than this is an invalid pattern (bounds RE2 compile time)."""
_SHOWN_PATTERNS = 3
_SHOWN_PATTERN_CHARS = 64


@dataclass(frozen=True, slots=True)
class WorkloadView:
    """What the policy needs of a workload; built by the controller from the cached object.

    ``annotations`` is ``metadata.annotations``; ``template_annotations`` is
    ``spec.template.metadata.annotations``; ``refs`` what its pod template references.
    """

    ref: ObjectRef
    annotations: Mapping[str, str] = field(default_factory=dict)
    template_annotations: Mapping[str, str] = field(default_factory=dict)
    refs: PodRefs = field(default_factory=PodRefs)


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """The configuration the rules read: annotation keys and ``--auto-reload-all``."""

    keys: AnnotationKeys = field(default_factory=AnnotationKeys)
    auto_reload_all: bool = False


class Reason(enum.StrEnum):
    """Why :func:`decide` decided as it did (safe to log and to use as a metric label)."""

    # reload
    EXPLICIT = "explicit"
    """The type's reload list has an entry matching the source name (no reference needed)."""
    SEARCH = "search"
    """Workload has ``search`` truthy, the referenced source has ``match`` truthy."""
    AUTO = "auto"
    """Generic ``reloader.stakater.com/auto`` truthy, source referenced."""
    TYPED_AUTO = "typed-auto"
    """The type's ``configmap./secret.reloader.stakater.com/auto`` truthy, source referenced."""
    AUTO_RELOAD_ALL = "auto-reload-all"
    """``--auto-reload-all`` and the source is referenced; no auto opt-out."""
    # no reload
    OTHER_NAMESPACE = "other-namespace"
    """Source and workload are in different namespaces."""
    IGNORED = "ignored"
    """The source carries ``reloader.stakater.com/ignore`` truthy."""
    EXCLUDED = "excluded"
    """The source's name is in the workload's exclude list for its type."""
    NOT_REFERENCED = "not-referenced"
    """Search, auto or auto-reload-all would apply, but the pod template does not use it."""
    AUTO_DISABLED = "auto-disabled"
    """``--auto-reload-all``, but auto / the typed auto is set to a non-true value."""
    NOT_MATCHED = "not-matched"
    """The workload has reloader annotations, none of which selects this source."""
    NO_ANNOTATION = "no-annotation"
    """The workload has no reloader annotation at all (and no ``--auto-reload-all``)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of :func:`decide` for one (workload, source) pair.

    ``container`` is where the ``env-vars`` sink puts the env var: set only when
    ``reload`` is true and the pod has a regular container. ``matched_entry`` is the
    reload-list entry that matched (``EXPLICIT`` only; for explanations, not compared).
    ``invalid_patterns`` lists the reload-list entries that are not valid patterns, and
    ``oversized`` the annotation keys whose lists exceed the size caps and were ignored
    (seen while deciding; the caller logs them and records a Warning Event), whatever
    the decision.
    """

    reload: bool
    reason: Reason
    container: str | None = None
    invalid_patterns: tuple[str, ...] = ()
    oversized: tuple[str, ...] = ()
    matched_entry: str | None = field(default=None, compare=False)


def is_truthy(value: str | None) -> bool:
    """True for exactly ``1 t T true TRUE True`` (Go's ``strconv.ParseBool``); else False."""
    return value in TRUTHY_VALUES


def shown_patterns(patterns: tuple[str, ...]) -> str:
    """Tenant patterns for a log line or Event: the first few, each shortened."""
    shown = [repr(p if len(p) <= _SHOWN_PATTERN_CHARS else p[:_SHOWN_PATTERN_CHARS] + "…")
             for p in patterns[:_SHOWN_PATTERNS]]
    if len(patterns) > _SHOWN_PATTERNS:
        shown.append(f"and {len(patterns) - _SHOWN_PATTERNS} more")
    return ", ".join(shown)


def relevant_keys(keys: AnnotationKeys) -> tuple[str, ...]:
    """The workload annotation keys whose presence selects where annotations are read."""
    return (
        keys.auto,
        keys.configmap_auto,
        keys.secret_auto,
        keys.configmap_reload,
        keys.secret_reload,
        keys.search,
        keys.configmaps_exclude,
        keys.secrets_exclude,
    )


def effective_annotations(view: WorkloadView, keys: AnnotationKeys) -> Mapping[str, str]:
    """The annotations the rules read for ``view``.

    The workload's metadata annotations if any key of :func:`relevant_keys` is present
    there (whatever its value, even empty); else the pod template's annotations. A
    fallback, never a merge: one relevant key in the metadata hides the whole template.
    """
    metadata = view.annotations or {}
    if any(key in metadata for key in relevant_keys(keys)):
        return metadata
    return view.template_annotations or {}


def _split(value: str | None) -> list[str] | None:
    """A comma list: entries trimmed, empty entries dropped; None when over the size caps."""
    if not value:
        return []
    if len(value) > MAX_LIST_BYTES or len(value.encode("utf-8", "surrogatepass")) > MAX_LIST_BYTES:
        return None
    entries = [part.strip() for part in value.split(",") if part.strip()]
    return entries if len(entries) <= MAX_LIST_ENTRIES else None


def _read_list(annotations: Mapping[str, str], key: str, oversized: list[str]) -> list[str]:
    """The list under ``key``; an over-cap list reads as empty and ``key`` joins ``oversized``."""
    entries = _split(annotations.get(key))
    if entries is None:
        oversized.append(key)
        return []
    return entries


def _list_key(kind: SourceKind, keys: AnnotationKeys) -> str:
    return keys.configmap_reload if kind is SourceKind.CONFIGMAP else keys.secret_reload


def _exclude_key(kind: SourceKind, keys: AnnotationKeys) -> str:
    return keys.configmaps_exclude if kind is SourceKind.CONFIGMAP else keys.secrets_exclude


def _typed_auto_key(kind: SourceKind, keys: AnnotationKeys) -> str:
    return keys.configmap_auto if kind is SourceKind.CONFIGMAP else keys.secret_auto


def has_explicit_lists(view: WorkloadView, keys: AnnotationKeys) -> bool:
    """Whether the workload has a non-empty ConfigMap or Secret reload list.

    Such a workload may match sources it does not reference, so the controller flags it
    ``explicit`` in the :class:`~gitops_reloader.index.ReferenceIndex`. An oversized list
    counts too: it matches nothing, but :func:`decide` must see it to report it.
    """
    annotations = effective_annotations(view, keys)
    return any(_split(annotations.get(key)) != [] for key in (keys.configmap_reload, keys.secret_reload))


# At most ~60 KB per compiled program (RE2's 256 KiB budget includes the DFA cache), so
# a tenant who writes thousands of distinct patterns holds tens of MB at the very most.
@functools.lru_cache(maxsize=1024)
def _compile(pattern: str) -> LinearPattern | None:
    """The compiled RE2 pattern, or None if it is invalid or too long (cached both ways)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return None
    try:
        return compile_linear(pattern, capture=False)
    except RegexError:
        return None


def _match_list(name: str, entries: list[str]) -> tuple[str | None, tuple[str, ...]]:
    """The first entry that fully matches ``name`` (None: none does), and every invalid entry.

    All entries are checked for validity even after a match, so that a broken entry is
    reported on every change, not only on those that happen to reach it.
    """
    matched: str | None = None
    invalid: list[str] = []
    for entry in entries:
        compiled = _compile(entry)
        if compiled is None:
            invalid.append(entry)
        elif matched is None and compiled.fullmatch(name) is not None:
            matched = entry
    return matched, tuple(invalid)


def choose_container(refs: PodRefs, kind: SourceKind, name: str) -> str | None:
    """The regular container that receives the env var for source ``kind``/``name``.

    Stakater's order: the first regular container that mounts a volume of the source;
    else the first regular container that uses it through ``env``/``envFrom``; else (the
    source is used only by init containers, or not at all) the first regular container.
    None if the pod has no regular container.
    """
    regular = [c for c in refs.containers if not c.init]
    volumes = refs.volume_configmaps if kind is SourceKind.CONFIGMAP else refs.volume_secrets
    mounters = volumes.get(name, ())
    for container in regular:
        if container.name in mounters:
            return container.name
    for container in regular:
        if container.uses(kind, name):
            return container.name
    return regular[0].name if regular else None


def decide(view: WorkloadView, source: SourceMeta, options: PolicyOptions) -> Decision:
    """Apply the rules in the module docstring to one workload and one changed source."""
    keys = options.keys
    kind, name = source.ref.kind, source.ref.name
    if source.ref.namespace != view.ref.namespace:
        return Decision(False, Reason.OTHER_NAMESPACE)
    source_annotations = source.annotations or {}
    if is_truthy(source_annotations.get(keys.ignore)):
        return Decision(False, Reason.IGNORED)

    annotations = effective_annotations(view, keys)
    oversized: list[str] = []
    if name in _read_list(annotations, _exclude_key(kind, keys), oversized):
        return Decision(False, Reason.EXCLUDED)

    matched, invalid = _match_list(name, _read_list(annotations, _list_key(kind, keys), oversized))
    too_large = tuple(oversized)

    def reload(reason: Reason) -> Decision:
        return Decision(True, reason, choose_container(view.refs, kind, name), invalid, too_large,
                        matched if reason is Reason.EXPLICIT else None)

    def no_reload(reason: Reason) -> Decision:
        return Decision(False, reason, None, invalid, too_large)

    if matched is not None:
        return reload(Reason.EXPLICIT)

    referenced = name in view.refs.names(kind)
    search = is_truthy(annotations.get(keys.search)) and is_truthy(
        source_annotations.get(keys.match)
    )
    auto_value = annotations.get(keys.auto)
    typed_value = annotations.get(_typed_auto_key(kind, keys))
    if search or is_truthy(auto_value) or is_truthy(typed_value):
        if not referenced:
            return no_reload(Reason.NOT_REFERENCED)
        if search:
            return reload(Reason.SEARCH)
        return reload(Reason.AUTO if is_truthy(auto_value) else Reason.TYPED_AUTO)

    if options.auto_reload_all:
        # auto / typed auto set, not truthy (we got here), and not empty: an opt-out.
        if auto_value or typed_value:
            return no_reload(Reason.AUTO_DISABLED)
        return reload(Reason.AUTO_RELOAD_ALL) if referenced else no_reload(Reason.NOT_REFERENCED)

    if any(key in annotations for key in relevant_keys(keys)):
        return no_reload(Reason.NOT_MATCHED)
    return no_reload(Reason.NO_ANNOTATION)
