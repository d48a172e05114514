"""List-then-watch informers (client-go's reflector + shared informer, in one small class).

One daemon thread per informer: list in pages (``limit``/``continue``), replace the
store, then watch from the list's resourceVersion with bookmarks. When the watch ends it
is re-opened from the last resourceVersion seen; a ``410 Gone`` (HTTP or ERROR event)
relists, and the store diff makes a relist with nothing changed notify nobody; other
errors back off exponentially on the injected clock and re-watch.

Each raw object passes through ``transform`` on arrival and only its result is kept (a
ConfigMap/Secret becomes a small :class:`~gitops_reloader.model.SourceMeta`: the payload
is dropped at once, DESIGN contract 3). A list holds at most one page of payloads: each
item is released as soon as it is transformed, and once the list is stored the heap pages
it used are handed back to the operating system (:mod:`gitops_reloader.kube.heap`).

Handler contract (as client-go's): called on the informer's thread, in order, once per
change; it must not block for long or raise (exceptions are logged and swallowed), must
not mutate records, and sees ``initial=True`` for the first list's adds.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from gitops_reloader.errors import KubeError, KubeGone
from gitops_reloader.kube.api import JSON, KubeApi, WatchStream
from gitops_reloader.kube.heap import release_free_heap
from gitops_reloader.kube.resources import ResourceKind
from gitops_reloader.kube.store import Delta, Store, object_key

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class InformerEvent(Generic[T]):
    """A change delivered to the handler."""

    resource: str
    delta: Delta[T]
    initial: bool
    resource_version: str = ""
    """The watch event's object version (for a delete: the deletion's), or the list's."""


class Handler(Protocol[T]):
    def __call__(self, event: InformerEvent[T], /) -> None: ...


class WatchObserver(Protocol):
    """Metrics hooks (optional)."""

    def watch_restarted(self, resource: str, reason: str) -> None: ...

    def api_error(self, verb: str, resource: str, code: int) -> None: ...


@dataclass(frozen=True, slots=True)
class InformerOptions:
    namespace: str | None = None
    label_selector: str = ""
    field_selector: str = ""
    page_size: int = 500
    watch_timeout: int = 300
    backoff_initial: float = 0.2
    backoff_max: float = 30.0
    accept_namespace: Callable[[str], bool] | None = None
    """Objects of other namespaces are dropped on arrival, before the transform, and never
    stored (sharding: memory is spent only on the namespaces this instance owns)."""


class Informer(Generic[T]):
    """Keeps ``store`` in sync with one resource (optionally one namespace)."""

    def __init__(
        self,
        api: KubeApi,
        kind: ResourceKind,
        transform: Callable[[JSON], T],
        handler: Handler[T],
        *,
        options: InformerOptions = InformerOptions(),
        observer: WatchObserver | None = None,
    ) -> None:
        self.api = api
        self.kind = kind
        self.transform = transform
        self.handler = handler
        self.options = options
        self.observer = observer
        self.store: Store[T] = Store()
        self.name = kind.plural + (f"@{options.namespace}" if options.namespace else "")
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None
        self._resource_version = ""

    # --- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(timeout)

    def has_synced(self) -> bool:
        return self._synced.is_set()

    @property
    def handled_version(self) -> str:
        """The resourceVersion up to which every event was stored and handed to the handler."""
        return self._resource_version

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    # --- the loop ------------------------------------------------------------------

    def _run(self) -> None:
        delay = self.options.backoff_initial
        while not self._stop.is_set():
            try:
                if not self._resource_version:
                    self._list()
                if self._watch():
                    delay = self.options.backoff_initial
            except KubeGone:
                log.info("watch history expired, relisting", extra={"resource": self.name})
                self._observe_restart("expired")
                self._resource_version = ""
            except KubeError as exc:
                if self._stop.is_set():
                    return
                log.warning("list/watch failed, backing off",
                            extra={"resource": self.name, "error": str(exc),
                                   "delay_s": round(delay, 2)})
                self._observe_restart("error")
                if self.observer is not None and exc.status:
                    self.observer.api_error("watch", self.kind.plural, exc.status)
                self._stop.wait(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self.options.backoff_max)
            except Exception:  # a bug must not kill the informer thread silently
                log.exception("informer loop error", extra={"resource": self.name})
                self._stop.wait(delay)
                delay = min(delay * 2, self.options.backoff_max)

    def _observe_restart(self, reason: str) -> None:
        if self.observer is not None:
            self.observer.watch_restarted(self.kind.plural, reason)

    def _list(self) -> None:
        entries: list[tuple[str, str, T]] = []
        token = ""
        resource_version = ""
        while True:
            page = self.api.list(
                self.kind, namespace=self.options.namespace,
                label_selector=self.options.label_selector,
                field_selector=self.options.field_selector,
                limit=self.options.page_size, continue_token=token,
            )
            metadata = page.get("metadata") or {}
            resource_version = resource_version or str(metadata.get("resourceVersion", ""))
            items = page.pop("items", None) or []
            del page
            items.reverse()
            while items:  # each payload is freed as soon as it is transformed
                entry = self._entry(items.pop())
                if entry is not None:
                    entries.append(entry)
            token = str(metadata.get("continue") or "")
            if not token:
                break
        initial = not self._synced.is_set()
        deltas = self.store.replace(entries)
        self._resource_version = resource_version
        del entries
        for delta in deltas:
            self._notify(delta, initial=initial, resource_version=resource_version)
        del deltas
        self._synced.set()
        release_free_heap()

    def _entry(self, raw: JSON) -> tuple[str, str, T] | None:
        meta = raw.get("metadata") or {}
        name = meta.get("name")
        if not name:
            return None
        accept = self.options.accept_namespace
        if accept is not None and not accept(str(meta.get("namespace") or "")):
            return None
        try:
            record = self.transform(raw)
        except Exception:
            log.exception("cannot read object, skipped",
                          extra={"object": f"{meta.get('namespace')}/{self.kind.kind}/{name}"})
            return None
        return object_key(meta.get("namespace"), name), str(meta.get("resourceVersion", "")), record

    def _watch(self) -> bool:
        """Watch until the stream ends; True if at least one event arrived."""
        stream = self.api.watch(
            self.kind, resource_version=self._resource_version,
            namespace=self.options.namespace, label_selector=self.options.label_selector,
            field_selector=self.options.field_selector,
            timeout_seconds=self.options.watch_timeout,
        )
        self._stream = stream
        if self._stop.is_set():
            stream.close()
            return False
        got_event = False
        try:
            for event in stream:
                got_event = True
                self._apply(event)
                if self._stop.is_set():
                    break
        finally:
            self._stream = None
            stream.close()
        return got_event

    def _apply(self, event: JSON) -> None:
        kind = event.get("type")
        raw: dict[str, Any] = event.get("object") or {}
        if kind == "ERROR":
            code = int(raw.get("code") or 0)
            message = str(raw.get("message") or "watch error")
            if code == 410:
                raise KubeGone(f"watch {self.name}: {message}", status=410)
            raise KubeError(f"watch {self.name}: {message}", status=code)
        resource_version = str((raw.get("metadata") or {}).get("resourceVersion", ""))
        if kind == "BOOKMARK":
            if resource_version:
                self._resource_version = resource_version
            return
        entry = self._entry(raw)
        if entry is not None:
            key, rv, record = entry
            delta = self.store.delete(key) if kind == "DELETED" else self.store.upsert(key, rv, record)
            if delta is not None:
                self._notify(delta, initial=False, resource_version=resource_version)
        if resource_version:
            self._resource_version = resource_version

    def _notify(self, delta: Delta[T], *, initial: bool, resource_version: str) -> None:
        try:
            self.handler(InformerEvent(self.kind.plural, delta, initial, resource_version))
        except Exception:
            log.exception("event handler failed", extra={"resource": self.name, "key": delta.key})
