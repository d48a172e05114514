"""The workload kinds beyond the core ones, as data: one :class:`KindSpec` per row.

Built in (found through discovery, so a cluster without the CRD costs one log line):
Knative Serving ``Service``, OpenKruise ``CloneSet``, Advanced ``StatefulSet`` and Advanced
``DaemonSet``. Further kinds come from ``--workload-kinds-config FILE``
(:func:`parse_kinds_config`); each becomes a row of the same table, so the policy, index,
sinks, locate, explain and plan treat it like any other kind.

A row's :attr:`KindSpec.key` is what names the kind everywhere inside the controller
(``ObjectRef.kind``, Event and log ``object`` fields, ``explain KIND/NAME``): ``Kind.group``
as kubectl spells a kind of a given group (``StatefulSet.apps.kruise.io``), so the
Advanced StatefulSet never mixes with ``apps/v1`` StatefulSets and a custom kind never
shadows a built-in one. :func:`kube_kind` turns a key back into the object's ``kind``.

Pure: parsing takes text and returns rows or raises :class:`ConfigError` naming the entry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml

from gitops_reloader.errors import ConfigError
from gitops_reloader.rollout.completion import COMPLETES_LIKE

__all__ = [
    "BUILTIN_KINDS",
    "KindSpec",
    "kube_kind",
    "load_kinds_config",
    "parse_kinds_config",
    "template_path_problem",
]

MAX_CONFIG_BYTES: Final = 256 * 1024
MAX_KINDS: Final = 200
_DNS_SUBDOMAIN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
_VERSION: Final = re.compile(r"^v[0-9]+((alpha|beta)[0-9]+)?$")
_KIND: Final = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}$")
_PLURAL: Final = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
_FIELD: Final = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
_FIELDS: Final = ("group", "version", "kind", "plural", "podTemplatePath", "rollsOnTemplateChange",
                   "revisionNamePath", "completesLike", "pods")
_POD_FIELDS: Final = ("selector", "ownerDepth", "replicasPath")
MAX_OWNER_DEPTH: Final = 4
_SELECTOR_TERM: Final = re.compile(r"^[A-Za-z0-9./_-]{1,253}=([A-Za-z0-9._{}-]{0,63})$")


@dataclass(frozen=True, slots=True)
class KindSpec:
    """One workload kind: where its API lives and where its pod template is."""

    group: str
    version: str
    kind: str
    plural: str
    template_path: tuple[str, ...] = ("spec", "template")
    rolls: bool = True
    """Whether a change of the pod template rolls the workload (else new pods get it)."""
    revision_name_path: tuple[str, ...] = ()
    """A field that names the next revision and must change with every template change
    (Knative ``spec.template.metadata.name``): a workload that sets it is refused."""
    completes_like: str = ""
    """A configured kind's ``completesLike``: the name of the rule its rollout completes by
    (a key of :data:`~gitops_reloader.rollout.completion.COMPLETES_LIKE`: ``Deployment``,
    ``StatefulSet``, ``DaemonSet``, ``Ready-condition``, ``none``); "" for the rule of its
    own group and kind (:func:`~gitops_reloader.rollout.completion.rule_for`: OpenKruise's
    own, else the Ready condition). Read by ``WorkloadAdapter.rollout_status``."""
    discovered: bool = False
    """Watched once discovery finds its API (a built-in row); a configured row must be
    served at start-up instead."""
    fallback_versions: tuple[str, ...] = ()
    """Older versions of the API, watched instead when ``version`` is not served (a discovered
    row): the first one discovery finds served."""
    source: str = "built-in"
    """Where the row comes from, for messages: ``built-in`` or ``FILE entry N``."""
    pod_selector: str = ""
    """A configured kind's ``pods.selector``: the label selector of its pods, ``{name}``
    standing for the object's name ("" lists the namespace's pods and keeps those it owns)."""
    owner_depth: int = 1
    """A configured kind's ``pods.ownerDepth``: how many controller ``ownerReferences`` lie
    between it and its pods (1: it owns them; 2: it owns a StatefulSet that owns them)."""
    replicas_path: tuple[str, ...] = ()
    """A configured kind's ``pods.replicasPath``: the field that says how many pods it should
    have (CloudNativePG ``spec.instances``); eviction never evicts while fewer exist."""

    def pod_selector_for(self, name: str) -> str:
        """The label selector of the pods of the object called ``name``."""
        return self.pod_selector.replace("{name}", name)

    @property
    def key(self) -> str:
        """``Kind.group``: the name of the kind inside the controller."""
        return f"{self.kind}.{self.group}"

    @property
    def resource_name(self) -> str:
        """``plural.group``, as RBAC rules, kubectl and ``--ignored-workload-types`` name it."""
        return f"{self.plural}.{self.group}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


BUILTIN_KINDS: Final[tuple[KindSpec, ...]] = (
    KindSpec("serving.knative.dev", "v1", "Service", "services",
             revision_name_path=("spec", "template", "metadata", "name"), discovered=True),
    # v1beta1 is OpenKruise master's storage version; releases up to v1.9 serve v1alpha1 only.
    KindSpec("apps.kruise.io", "v1beta1", "CloneSet", "clonesets", discovered=True,
             fallback_versions=("v1alpha1",)),
    KindSpec("apps.kruise.io", "v1beta1", "StatefulSet", "statefulsets", discovered=True),
    KindSpec("apps.kruise.io", "v1alpha1", "DaemonSet", "daemonsets", discovered=True),
)
"""Knative Serving and OpenKruise workloads: watched when their API is served."""


def kube_kind(key: str) -> str:
    """The object's ``kind`` for a controller kind key (``StatefulSet.apps.kruise.io`` →
    ``StatefulSet``; a core key such as ``Deployment`` is returned as it is)."""
    return key.split(".", 1)[0]


def _text(entry: Mapping[str, Any], field: str, pattern: re.Pattern[str], where: str, hint: str) -> str:
    value = entry.get(field)
    if not isinstance(value, str) or not pattern.match(value):
        shown = repr(value)[:80]
        raise ConfigError(f"{where}: {field} must be {hint}, got {shown}")
    return value


def _path(value: Any, where: str, field: str = "podTemplatePath") -> tuple[str, ...]:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {field} must be a dotted field path such as spec.template")
    parts = tuple(value.strip().split("."))
    bad = [p for p in parts if not _FIELD.match(p)]
    if bad or len(parts) > 10:
        raise ConfigError(f"{where}: {field} {value[:120]!r} is not a dotted field path "
                          "(letters, digits and '_' between dots, at most 10 fields)")
    if parts[0] != "spec":
        raise ConfigError(f"{where}: {field} {value[:120]!r} must start at spec")
    return parts


def _entry(entry: Any, where: str) -> KindSpec:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: must be a mapping with {', '.join(_FIELDS)}")
    unknown = sorted(str(k) for k in entry if k not in _FIELDS)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)[:200]}; "
                          f"known: {', '.join(_FIELDS)}")
    rolls = entry.get("rollsOnTemplateChange", True)
    if not isinstance(rolls, bool):
        raise ConfigError(f"{where}: rollsOnTemplateChange must be true or false")
    pod_selector, owner_depth, replicas_path = _pods(entry.get("pods"), where)
    completes_like = entry.get("completesLike", "")
    if "completesLike" in entry and (not isinstance(completes_like, str)
                                     or completes_like not in COMPLETES_LIKE):
        raise ConfigError(f"{where}: completesLike must be one of {', '.join(COMPLETES_LIKE)}, "
                          f"got {repr(completes_like)[:80]}")
    return KindSpec(
        group=_text(entry, "group", _DNS_SUBDOMAIN, where, "an API group such as example.com"),
        version=_text(entry, "version", _VERSION, where, "an API version such as v1 or v1beta1"),
        kind=_text(entry, "kind", _KIND, where, "a kind such as Worker"),
        plural=_text(entry, "plural", _PLURAL, where, "the lower-case resource name such as workers"),
        template_path=(_path(entry.get("podTemplatePath"), where)
                       if "podTemplatePath" in entry or "pods" not in entry else ()),
        rolls=rolls,
        revision_name_path=(_path(entry["revisionNamePath"], where, "revisionNamePath")
                            if "revisionNamePath" in entry else ()),
        completes_like=completes_like,
        source=where,
        pod_selector=pod_selector,
        owner_depth=owner_depth,
        replicas_path=replicas_path,
    )


def _pods(value: Any, where: str) -> tuple[str, int, tuple[str, ...]]:
    """``pods``: (its label selector, its owner depth, its replicas path); absent: ("", 1, ())."""
    if value is None:
        return "", 1, ()
    if not isinstance(value, Mapping) or set(value) - set(_POD_FIELDS):
        raise ConfigError(f"{where}: pods must be a mapping with {', '.join(_POD_FIELDS)}")
    selector = value.get("selector", "")
    terms = selector.split(",") if isinstance(selector, str) and selector else []
    if (not isinstance(selector, str) or len(selector) > 1024
            or not all(_SELECTOR_TERM.match(t) for t in terms)):
        raise ConfigError(f"{where}: pods.selector must be key=value terms separated by commas "
                          f"({{name}} stands for the object's name), got {repr(selector)[:120]}")
    depth = value.get("ownerDepth", 1)
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_OWNER_DEPTH:
        raise ConfigError(f"{where}: pods.ownerDepth must be an integer from 1 to {MAX_OWNER_DEPTH}")
    replicas = _path(value["replicasPath"], where, "pods.replicasPath") if "replicasPath" in value else ()
    return selector, depth, replicas


def parse_kinds_config(text: str, *, source: str) -> tuple[KindSpec, ...]:
    """The kinds listed in a ``--workload-kinds-config`` document (``kinds:`` list).

    Raises :class:`ConfigError` naming ``source`` and the entry on anything invalid, and
    on a kind listed twice or one that is built in.
    """
    if len(text.encode()) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML ({type(exc).__name__})") from None
    if doc is None:
        return ()
    entries = doc.get("kinds") if isinstance(doc, Mapping) else None
    if not isinstance(entries, list) or (isinstance(doc, Mapping) and set(doc) - {"kinds"}):
        raise ConfigError(f"{source}: must be a mapping with one key, kinds: a list of workload kinds")
    if len(entries) > MAX_KINDS:
        raise ConfigError(f"{source}: more than {MAX_KINDS} kinds")
    specs: list[KindSpec] = []
    taken = {spec.key: spec.source for spec in BUILTIN_KINDS}
    for number, raw in enumerate(entries, start=1):
        name = raw.get("kind") if isinstance(raw, Mapping) else None
        where = f"{source} entry {number}" + (f" ({name[:63]})" if isinstance(name, str) else "")
        spec = _entry(raw, where)
        if spec.key in taken:
            raise ConfigError(f"{where}: {spec.key} is already defined ({taken[spec.key]})")
        taken[spec.key] = where
        specs.append(spec)
    return tuple(specs)


def load_kinds_config(path: str) -> tuple[KindSpec, ...]:
    """Read and parse ``--workload-kinds-config``; a missing file is a :class:`ConfigError`."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"--workload-kinds-config: cannot read {path!r}: {exc.strerror}") from None
    return parse_kinds_config(text, source=path)


def template_path_problem(schema: Mapping[str, Any], path: tuple[str, ...]) -> str | None:
    """Why ``path`` names no pod template in a kind's structural schema; ``None`` when it
    does, or when the schema cannot tell (a field that keeps unknown fields)."""
    node: Mapping[str, Any] = schema
    for depth, key in enumerate(path):
        props = node.get("properties")
        if not isinstance(props, Mapping) or not props:
            return None if node.get("x-kubernetes-preserve-unknown-fields") else (
                f"{'.'.join(path[:depth]) or 'the object'} has no fields")
        child = props.get(key)
        if not isinstance(child, Mapping):
            return f"{'.'.join(path[:depth + 1])} is not a field of the kind's schema"
        node = child
    kind = node.get("type")
    if kind not in (None, "object"):
        return f"{'.'.join(path)} is a {kind}, not a pod template"
    props = node.get("properties")
    if isinstance(props, Mapping) and props and "spec" not in props:
        return f"{'.'.join(path)} has no spec: not a pod template"
    return None
