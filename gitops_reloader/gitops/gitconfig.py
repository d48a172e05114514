"""The ``--git-config`` file: which manifest repositories exist and how to reach them.

Format (YAML)::

    defaultRepository: manifests          # optional with one repository (it is the default)
    commitMessage: "reload: {workloads} ({sources} changed)"   # optional
    argocdNamespace: argocd               # optional: where Argo CD Applications live
    argocd:                               # optional: used only when argocd-cm can't be read
      trackingMethod: annotation          # annotation | label | annotation+label
      instanceLabelKey: app.kubernetes.io/instance
    repositories:
      - name: manifests                   # [a-z0-9._-], used in annotations and as a directory name
        url: https://git.example.com/org/manifests.git
        aliases:                          # optional: other spellings of the same repository
          - ssh://git@git.example.com/org/manifests
          - git@git.example.com:org/manifests.git
        branch: main                      # default main
        tokenFile: /etc/gitops-reloader/git/token      # HTTP(S): token (mounted Secret)
        username: gitops-reloader                       # HTTP Basic user sent with the token
        sshKeyFile: /etc/gitops-reloader/git/id_ed25519  # SSH: key + known_hosts
        knownHostsFile: /etc/gitops-reloader/git/known_hosts
        author: {name: gitops-reloader, email: bot@example.com}
        paths: [apps/, clusters/prod]     # optional: only these directories are scanned and edited
        commitMessage: "..."              # optional, per repository
        signCommits: false                # optional: git commit -S with git's configured signing key
        signingKey:                       # optional: sign every commit with this mounted key
          file: /etc/gitops-reloader/signing/key   # SSH private key, or an armored OpenPGP secret key
          format: ssh                     # ssh (default) | openpgp
        githubApp:                        # optional, instead of tokenFile: authenticate as a GitHub App
          appId: "123456"                 # the App's id (or its client id)
          privateKeyFile: /etc/gitops-reloader/github-app/private-key.pem
          installationId: 7890            # optional: found from the repository when omitted
          apiUrl: https://ghe.example.com/api/v3   # optional: default as pullRequest.apiUrl for github
        annotationKeys: [podAnnotations, annotations]  # optional: maps a git-target may write into
        pullRequest:                      # optional: what the pull-request sink needs
          host: github                    # github | gitlab | gitea | forgejo | bitbucket | azure
          apiUrl: https://api.github.com  # default: derived from the clone URL (see below)
          tokenFile: /etc/gitops-reloader/git/token   # API token; default: the repository's tokenFile
          repository: org/manifests       # owner/name (GitLab: project path); default: from the URL
          labels: [gitops-reloader]       # added to every pull request
          autoMerge: false                # ask the host to merge once checks pass
          grouping: workload              # workload | repository; default: --pr-grouping
          enabled: true                   # false: as if the block were absent (Helm renders it)
          username: me@example.com        # Bitbucket only: HTTP Basic with username + token (app
                                          # password or API token); without it: Bearer access token
          removeSourceBranch: false       # GitLab, Azure DevOps: delete the branch when it is merged
          squash: false                   # GitLab only: squash the MR's commits on merge
          mergeStrategy: noFastForward    # Azure DevOps only: auto-complete's merge strategy
                                          # (noFastForward | squash | rebase | rebaseMerge)
        tenants:                          # optional: which namespaces may write which files
          - namespaces: [team-a, "team-a-*"]
            paths: ["apps/team-a/**", "charts/team-a/values*.yaml"]
            documentNamespace: team-a     # optional: namespace-less documents here deploy to team-a

``commitMessage`` is a :meth:`str.format` template with the fields ``{workloads}``
(names of the reloaded workloads), ``{sources}`` (``configmap/app-config`` ...),
``{repository}`` and ``{count}`` (number of workloads). Nothing else can be
referenced, so a template can never put data or hashes into a commit.

``annotationKeys`` lists the map keys a ``gitops-reloader.io/git-target`` may end in:
the digest is only ever written into a map whose own key is one of these (default
``podAnnotations`` and ``annotations``). Each entry is a non-empty key without
whitespace or control characters, at most 253 characters; the list must not be empty.

``pullRequest`` defaults, so that the block can be as short as ``{host: gitlab}``:

- ``apiUrl``: GitHub on ``github.com`` → ``https://api.github.com``, Bitbucket on
  ``bitbucket.org`` → ``https://api.bitbucket.org/2.0``; otherwise the clone URL's
  origin (``https://`` for SSH URLs) plus ``/api/v3`` (GitHub Enterprise), ``/api/v4``
  (GitLab) or ``/api/v1`` (Gitea, Forgejo). Bitbucket Server/Data Center is not
  supported. Azure DevOps: the organisation or collection the clone URL names
  (:func:`azure_location`: ``https://dev.azure.com/{org}``, ``https://{org}.visualstudio.com``,
  ``https://server/tfs/{collection}``), from HTTPS ``.../{project}/_git/{repo}`` and SSH
  ``v3/{org}/{project}/{repo}`` URLs; ``repository`` is then ``project/repo``.
- ``repository``: from the clone URL's path without ``.git``: the whole path on GitLab
  (``group/sub/project``), its last two segments elsewhere (``owner/name``).
- ``tokenFile``: the repository's ``tokenFile`` (a token with both git and API access);
  required when the repository is cloned over SSH.

Everything here is pure data: :func:`parse_git_config` validates text, and
:func:`load_git_config` reads the file. Every error is a
:class:`~gitops_reloader.errors.ConfigError` that names the file and the field
(``repositories[1].url``), never a value read from the file: credentials live in the
files the config points to, but a mistyped config could still hold one.

``aliases`` lists other URLs of the same repository, as an Argo CD Application or a
Flux GitRepository may spell it (``flux bootstrap`` writes ``ssh://git@host/org/fleet``
while the config uses ``https://host/org/fleet.git`` for the pull-request API's token).
Each alias is compared with the rule ``url`` is compared with (Argo CD's ``git.SameURL``,
:func:`~gitops_reloader.gitops.repourl.same_url`); a URL that matches an alias finds the
repository for every lookup by URL, while clone and push still use ``url`` and its
credentials. Entries with the same ``url`` (one per branch) share their aliases. At
most :data:`MAX_ALIASES` aliases of at most :data:`MAX_ALIAS_CHARS` characters each;
an alias must be a URL Argo CD can parse, without whitespace or a password, and must not
name (by the same rule) another repository's ``url`` or alias: that is a start-up error
naming both fields. Under that rule ``git@host:org/fleet.git`` and
``ssh://git@host/org/fleet`` are one spelling: one alias covers both.

``githubApp`` replaces ``tokenFile``: the controller signs a JWT with the App's key and
exchanges it for installation tokens (:mod:`gitops_reloader.gitops.hosts.githubapp`), used for git
over HTTPS and for the pull-request API (``pullRequest.host`` must then be ``github`` and
needs no ``tokenFile``); over SSH the deploy key still serves git. Without an ``author``,
commits are authored by the App's bot account. ``signingKey`` signs every commit
(:mod:`gitops_reloader.gitops.signing`); it implies ``signCommits``.

``tenants`` is the repository's tenancy policy
(:mod:`gitops_reloader.gitops.tenancy` applies it). Without it every namespace may use
the repository, but a workload still only edits the document with its own kind, name
and namespace. With it, a namespace that no entry names may not use the repository at
all, and a named namespace may write only files that match the paths of its entries.
``namespaces`` and ``paths`` are globs (:mod:`gitops_reloader.gitops.pathglob`: ``?``,
``*`` within a path segment, ``**`` as a whole segment across segments), matched in
linear time. ``documentNamespace`` says where documents without ``metadata.namespace``
under the entry's paths are deployed; the list may not be empty (omit it instead).

YAML is read with PyYAML's safe loader (installed with the ``kubernetes`` client);
ruamel.yaml is reserved to :mod:`gitops_reloader.gitops.yamledit`.
"""

from __future__ import annotations

import json
import re
import string
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import yaml

from gitops_reloader.errors import ConfigError
from gitops_reloader.gitops.auth import display_url
from gitops_reloader.gitops.pathglob import Glob, GlobError, compile_glob
from gitops_reloader.gitops.repourl import normalize_git_url, normalize_git_url_allow_invalid

__all__ = [
    "AZURE_MERGE_STRATEGIES",
    "DEFAULT_ANNOTATION_KEYS",
    "DEFAULT_COMMIT_MESSAGE",
    "MAX_ALIASES",
    "MAX_ALIAS_CHARS",
    "PR_GROUPINGS",
    "PR_HOSTS",
    "SIGNING_FORMATS",
    "CommitAuthor",
    "GitConfig",
    "GitHubAppConfig",
    "PullRequestConfig",
    "RepositoryConfig",
    "SigningKeyConfig",
    "TenantRule",
    "alias_problem",
    "azure_location",
    "host_and_path",
    "load_git_config",
    "parse_git_config",
    "repository_from_url",
]

DEFAULT_COMMIT_MESSAGE = "reload: {workloads} ({sources} changed)"
DEFAULT_ANNOTATION_KEYS: tuple[str, ...] = ("podAnnotations", "annotations")
_MAX_CONFIG_CHARS = 1024 * 1024  # far above any real config; bounds the YAML parse
"""Default subject of a git-sink commit, e.g. ``reload: web, worker (configmap/app-config changed)``."""

MAX_ALIASES = 16
"""Most ``aliases`` one repository may list (a remote has a handful of spellings, not more)."""
MAX_ALIAS_CHARS = 512
"""Longest alias accepted (far above any real clone URL)."""

_TEMPLATE_FIELDS = frozenset({"workloads", "sources", "repository", "count"})
_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,61}[a-z0-9])?$")
_EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+$")
_TOP_KEYS = frozenset({"repositories", "defaultRepository", "commitMessage", "argocdNamespace", "argocd"})
_ARGOCD_KEYS = frozenset({"trackingMethod", "instanceLabelKey"})
_TRACKING_METHODS = ("annotation", "label", "annotation+label")
_LABEL_KEY = re.compile(
    r"^(?:[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
_REPO_KEYS = frozenset({
    "name", "url", "aliases", "branch", "tokenFile", "username", "sshKeyFile", "knownHostsFile",
    "author", "paths", "commitMessage", "pullRequest", "signCommits",
    "tenants", "annotationKeys", "githubApp", "signingKey",
})
_APP_KEYS = frozenset({"appId", "privateKeyFile", "installationId", "apiUrl"})
_APP_ID = re.compile(r"^(?:[1-9][0-9]{0,18}|Iv[0-9A-Za-z.]{1,40})$")
_SIGNING_KEYS = frozenset({"file", "format"})
SIGNING_FORMATS = ("ssh", "openpgp")
"""Values of ``signingKey.format``."""
_TENANT_KEYS = frozenset({"namespaces", "paths", "documentNamespace"})
_NAMESPACE_GLOB = re.compile(r"^[a-z0-9*?-]{1,63}$")
_NAMESPACE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_AUTHOR_KEYS = frozenset({"name", "email"})
_PR_KEYS = frozenset({
    "enabled", "host", "apiUrl", "tokenFile", "repository", "labels", "autoMerge", "grouping",
    "username", "removeSourceBranch", "squash", "mergeStrategy",
})

PR_HOSTS = ("github", "gitlab", "gitea", "forgejo", "bitbucket", "azure")
"""Values of ``pullRequest.host`` (``forgejo`` speaks Gitea's API)."""
PR_GROUPINGS = ("workload", "repository")
"""Values of ``pullRequest.grouping`` and ``--pr-grouping``."""
_PUBLIC_API = {("github", "github.com"): "https://api.github.com",
               ("bitbucket", "bitbucket.org"): "https://api.bitbucket.org/2.0"}
_API_PREFIX = {"github": "/api/v3", "gitlab": "/api/v4", "gitea": "/api/v1", "forgejo": "/api/v1"}
_LABEL = re.compile(r"^[^,\n\r]{1,100}$")
_REPO_SEGMENT = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$")
_AZURE_SEGMENT = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_. -]{0,63}$")  # project names may hold spaces
AZURE_MERGE_STRATEGIES = ("noFastForward", "squash", "rebase", "rebaseMerge")
"""Values of ``pullRequest.mergeStrategy`` (Azure DevOps auto-complete)."""
_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/\s]+)@)?(?P<host>[^:/\s]+):(?!//)(?P<path>.*)$")


@dataclass(frozen=True, slots=True)
class CommitAuthor:
    """Author and committer of the commits the git sink makes."""

    name: str = "gitops-reloader"
    email: str = "gitops-reloader@localhost"


@dataclass(frozen=True, slots=True)
class PullRequestConfig:
    """How the pull-request sink reaches the git host of one repository.

    ``api_url`` is always set (given or derived, see the module docstring);
    ``token_file`` is a *path* (the repository's own token file by default; ``""`` when
    the repository's ``githubApp`` provides the tokens).
    ``grouping`` is ``""`` when the repository does not set it: the
    ``--pr-grouping`` flag decides.
    """

    host: str
    api_url: str
    token_file: str
    repository: str
    labels: tuple[str, ...] = ()
    auto_merge: bool = False
    grouping: str = ""
    username: str = ""
    """Bitbucket: HTTP Basic ``username:token`` (app password, API token); empty: Bearer."""
    remove_source_branch: bool = False
    """GitLab: delete the source branch when the merge request is merged."""
    squash: bool = False
    """GitLab: squash the merge request's commits when it is merged."""
    merge_strategy: str = ""
    """Azure DevOps: the merge strategy of auto-complete (``""``: noFastForward)."""


@dataclass(frozen=True, slots=True)
class GitHubAppConfig:
    """A GitHub App the repository authenticates as (``githubApp``); paths, never keys."""

    app_id: str
    private_key_file: str
    api_url: str
    installation_id: int = 0
    """0: looked up from the repository (``GET /repos/{o}/{r}/installation``)."""
    repository: str = ""
    """``owner/name`` on GitHub, from the URL."""


@dataclass(frozen=True, slots=True)
class SigningKeyConfig:
    """The mounted key every commit is signed with (``signingKey``)."""

    file: str
    format: str = "ssh"


@dataclass(frozen=True, slots=True)
class TenantRule:
    """One ``tenants`` entry: these namespaces may write files matching these paths.

    ``document_namespace``: where documents without ``metadata.namespace`` under
    these paths are deployed (``None``: the entry does not say).
    """

    namespaces: tuple[Glob, ...]
    paths: tuple[Glob, ...]
    document_namespace: str | None = None

    def names(self, namespace: str) -> bool:
        """Whether the entry names ``namespace``."""
        return any(glob.match(namespace) for glob in self.namespaces)

    def covers(self, path: str) -> bool:
        """Whether ``path`` (repository-relative, normalized) matches one of the paths."""
        return any(glob.match(path) for glob in self.paths)


@dataclass(frozen=True, slots=True)
class RepositoryConfig:
    """One manifest repository and branch the git sink may write to.

    Credential fields are *paths* to files (a mounted Secret), never the credentials.
    ``paths`` limits scanning and editing to these repository-relative directories
    (empty: the whole repository).
    """

    name: str
    url: str
    branch: str = "main"
    token_file: str = ""
    username: str = ""
    ssh_key_file: str = ""
    known_hosts_file: str = ""
    author: CommitAuthor = field(default_factory=CommitAuthor)
    paths: tuple[str, ...] = ()
    commit_message: str = DEFAULT_COMMIT_MESSAGE
    pull_request: PullRequestConfig | None = None
    """Settings of the pull-request sink; ``None``: no pull requests for this repository."""
    sign_commits: bool = False
    """``git commit -S``: sign with the key git is configured with (``user.signingkey``)."""
    tenants: tuple[TenantRule, ...] = ()
    """The tenancy policy; empty: every namespace may use the repository (exact identity)."""
    annotation_keys: tuple[str, ...] = DEFAULT_ANNOTATION_KEYS
    """The map keys a ``git-target`` path may end in (the maps the digest may be written into)."""
    aliases: tuple[str, ...] = ()
    """Other URLs naming this repository (matched like ``url``; never cloned or pushed to)."""
    github_app: GitHubAppConfig | None = None
    """The GitHub App whose installation tokens serve git (HTTPS) and the API; ``None``: tokenFile."""
    signing_key: SigningKeyConfig | None = None
    """The key commits are signed with; ``None``: ``sign_commits`` decides (git's own key)."""
    author_given: bool = False
    """Whether ``author`` was configured (else a GitHub App's bot account authors the commits)."""

    def allows(self, path: str) -> bool:
        """Whether ``path`` (repository-relative) lies inside :attr:`paths`."""
        if not self.paths:
            return True
        return any(path == p or path.startswith(p + "/") for p in self.paths)


@dataclass(frozen=True, slots=True)
class GitConfig:
    """All configured repositories; look them up by name or by remote URL.

    A URL finds a repository when it names the same repository as its ``url`` or one of
    the ``aliases`` of an entry with that ``url``, as Argo CD's ``git.SameURL`` decides.
    The lookup is one normalization of the URL and one dictionary access.
    """

    repositories: tuple[RepositoryConfig, ...] = ()
    default_repository: str | None = None
    argocd_namespace: str = "argocd"
    """Namespace of Argo CD Applications whose tracking id names no namespace."""
    argocd_tracking_method: str = ""
    """``argocd.trackingMethod``: used when ``argocd-cm`` can't be read (``""``: Argo CD's default)."""
    argocd_instance_label_key: str = ""
    """``argocd.instanceLabelKey``: used when ``argocd-cm`` can't be read (``""``: Argo CD's default)."""
    _spellings: dict[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    """Normalized ``url`` or alias → indexes of the entries it finds (every branch of that remote)."""
    _places: dict[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    """Host and path (:func:`_place`) of a ``url`` or alias → indexes of the entries (for hints)."""

    def __post_init__(self) -> None:
        remotes: dict[str, list[int]] = {}
        for i, repo in enumerate(self.repositories):
            remotes.setdefault(normalize_git_url_allow_invalid(repo.url), []).append(i)
        spellings: dict[str, tuple[int, ...]] = {}
        for remote, indexes in remotes.items():
            if not remote:
                continue  # an empty URL names nothing (SameURL is false for it)
            entries = tuple(indexes)
            spellings[remote] = entries
            for i in indexes:
                for alias in self.repositories[i].aliases:
                    spellings.setdefault(normalize_git_url_allow_invalid(alias), entries)
        places: dict[str, list[int]] = {}
        for i, repo in enumerate(self.repositories):
            for place in dict.fromkeys(_place(spelling) for spelling in (repo.url, *repo.aliases)):
                if place:
                    places.setdefault(place, []).append(i)
        object.__setattr__(self, "_spellings", spellings)
        object.__setattr__(self, "_places", {place: tuple(found) for place, found in places.items()})

    def get(self, name: str) -> RepositoryConfig | None:
        """The repository called ``name``, or ``None``."""
        for repo in self.repositories:
            if repo.name == name:
                return repo
        return None

    @property
    def default(self) -> RepositoryConfig | None:
        """The default repository (used by the scan), if any."""
        return self.get(self.default_repository) if self.default_repository else None

    def by_url(self, url: str, *, branch: str | None = None) -> list[RepositoryConfig]:
        """Repositories whose URL or an alias names the same repository as ``url``, as Argo CD decides it.

        :func:`~gitops_reloader.gitops.repourl.same_url` (argo-cd ``git.SameURL``): case,
        a trailing ``.git``, surrounding space and the scp-like SSH form do not matter;
        scheme, user, port and a trailing ``/`` do (``https://host/org/app`` and
        ``git@host:org/app`` are two repositories, unless one lists the other in
        ``aliases``). With ``branch``, only entries for that branch are returned.
        """
        normalized = normalize_git_url_allow_invalid(url)
        found = [self.repositories[i] for i in self._spellings.get(normalized, ())] if normalized else []
        if branch is not None:
            found = [r for r in found if r.branch == branch]
        return found

    def spelling(self, repo: RepositoryConfig, url: str) -> str:
        """Which configured spelling of ``repo`` matches ``url``: its ``url``, an alias, or ``""``.

        Aliases of other entries with the same ``url`` count (they are shared).
        """
        normalized = normalize_git_url_allow_invalid(url)
        if not normalized:
            return ""
        if normalize_git_url_allow_invalid(repo.url) == normalized:
            return repo.url
        return next((alias for alias in self.aliases(repo)
                     if normalize_git_url_allow_invalid(alias) == normalized), "")

    def aliases(self, repo: RepositoryConfig) -> tuple[str, ...]:
        """The aliases of ``repo``: its own and those of the entries with the same ``url``."""
        remote = normalize_git_url_allow_invalid(repo.url)
        entries = self._spellings.get(remote, ()) if remote else ()
        return tuple(dict.fromkeys(alias for i in entries for alias in self.repositories[i].aliases)) \
            or repo.aliases

    def same_place(self, url: str) -> list[RepositoryConfig]:
        """Repositories on the same host and path as ``url`` but not :meth:`by_url`'s (for hints).

        The port is ignored (SSH and HTTPS often listen on different ones), and so are the
        scheme, the user, case, a trailing ``.git`` and slashes. A URL longer than any
        alias may be is near nothing (no alias could make it match).
        """
        if len(url.strip()) > MAX_ALIAS_CHARS:
            return []
        wanted = _place(url)
        if not wanted or self.by_url(url):
            return []
        return [self.repositories[i] for i in self._places.get(wanted, ())]

    def alias_line(self, repo: RepositoryConfig, url: str) -> str:
        """The ``aliases:`` line that makes ``url`` find ``repo`` (``""`` if ``url`` can't be an alias).

        A YAML flow sequence of the repository's aliases followed by ``url``, ready to
        paste into its entry: ``aliases: ["ssh://git@github.com/org/fleet"]``.
        """
        text = url.strip()
        if alias_problem(text) is not None:
            return ""
        return "aliases: [" + ", ".join(json.dumps(a) for a in (*self.aliases(repo), text)) + "]"

    def resolve(self, reference: str) -> RepositoryConfig | None:
        """A repository by name, else by URL or alias (the first entry for that remote)."""
        by_name = self.get(reference.strip())
        if by_name is not None:
            return by_name
        matches = self.by_url(reference.strip())
        return matches[0] if matches else None


def alias_problem(text: str) -> str | None:
    """Why ``text`` can't be an alias (``None``: it can). Names no part of ``text``.

    An alias is at most :data:`MAX_ALIAS_CHARS` characters without whitespace or control
    characters, carries no password (``https://user:token@host/...``), and is a URL
    Argo CD's normalization accepts (otherwise Argo CD compares it as given, verbatim).
    """
    if not text:
        return "must not be empty"
    if len(text) > MAX_ALIAS_CHARS:
        return f"longer than {MAX_ALIAS_CHARS} characters"
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        return "must not contain whitespace or control characters"
    if display_url(text) != text:
        return "must not carry credentials (the repository's tokenFile or sshKeyFile authenticates)"
    if not normalize_git_url(text):
        return "not a URL Argo CD can parse (see docs/gitops-location.md)"
    return None


def _place(url: str) -> str:
    """``host/path`` of a remote for hints: no scheme, user, port, ``.git`` or slashes; lower case."""
    text = url.strip()
    host, path = "", ""
    if "://" in text:
        try:
            parts = urlsplit(text)
            host, path = parts.hostname or "", parts.path
        except ValueError:
            return ""
    elif (match := _SCP_LIKE.match(text)) is not None:
        host, path = match.group("host"), match.group("path")
    path = path.strip("/").removesuffix(".git").strip("/")
    return f"{host}/{path}".lower() if host and path else ""


def host_and_path(url: str) -> str:
    """``host[:port]/path`` of a git remote: no scheme, user, ``.git`` or trailing slash.

    For deriving a host's API URL and repository name (and hints), never to decide
    whether two URLs are one repository: that is :func:`~gitops_reloader.gitops.repourl.same_url`.
    The host is lower-cased; the path keeps its case.

    >>> host_and_path("git@github.com:Org/App.git")
    'github.com/Org/App'
    >>> host_and_path("https://user@GitHub.com/Org/App/")
    'github.com/Org/App'
    """
    text = url.strip()
    if not text:
        return ""
    if "://" in text:
        parts = urlsplit(text)
        host = (parts.hostname or "").lower()
        try:
            port = parts.port
        except ValueError:
            port = None
        default_ports = {"http": 80, "https": 443, "ssh": 22, "git": 9418}
        if port is not None and default_ports.get(parts.scheme.lower()) != port:
            host = f"{host}:{port}"
        path = parts.path
    else:
        match = _SCP_LIKE.match(text)
        if match is None:
            return text.rstrip("/").removesuffix(".git")  # a local path
        host, path = match.group("host").lower(), match.group("path")
    path = path.strip("/")
    path = path.removesuffix(".git").rstrip("/")
    return f"{host}/{path}" if path else host


def load_git_config(path: str) -> GitConfig:
    """Read and validate the ``--git-config`` file at ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--git-config {path}: cannot read the file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--git-config {path}: not UTF-8 text") from None
    return parse_git_config(text, source=path)


def parse_git_config(text: str, *, source: str = "<git-config>") -> GitConfig:
    """Validate the text of a git config file (see the module docstring for the format)."""
    where = f"--git-config {source}"
    if len(text) > _MAX_CONFIG_CHARS:
        raise ConfigError(f"{where}: larger than {_MAX_CONFIG_CHARS} characters")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise ConfigError(f"{where}: not valid YAML{at}") from None
    if data is None:
        data = {}
    top = _mapping(data, where, "the document")
    _no_unknown_keys(top, _TOP_KEYS, where, "")
    default_message = _template(top.get("commitMessage"), where, "commitMessage")
    raw_repos = top.get("repositories")
    if raw_repos is None:
        raw_repos = []
    if not isinstance(raw_repos, list):
        raise ConfigError(f"{where}: repositories: must be a list")
    repos: list[RepositoryConfig] = []
    names: set[str] = set()
    remotes: set[tuple[str, str]] = set()
    for i, raw in enumerate(raw_repos):
        repo = _repository(raw, where, f"repositories[{i}]", default_message)
        if repo.name in names:
            raise ConfigError(f"{where}: repositories[{i}].name: {repo.name!r} is used twice")
        remote = (normalize_git_url_allow_invalid(repo.url), repo.branch)
        if remote in remotes:
            raise ConfigError(
                f"{where}: repositories[{i}]: the same url and branch are configured twice"
            )
        names.add(repo.name)
        remotes.add(remote)
        repos.append(repo)
    _check_aliases(repos, where)
    default = top.get("defaultRepository")
    if default is not None:
        if not isinstance(default, str) or default not in names:
            raise ConfigError(f"{where}: defaultRepository: must be the name of a repository")
    elif len(repos) == 1:
        default = repos[0].name
    argocd_namespace = _string(top.get("argocdNamespace"), where, "argocdNamespace") or "argocd"
    if not _NAME.match(argocd_namespace):
        raise ConfigError(f"{where}: argocdNamespace: not a valid namespace name")
    method, label_key = _argocd(top.get("argocd"), where)
    return GitConfig(repositories=tuple(repos), default_repository=default,
                     argocd_namespace=argocd_namespace, argocd_tracking_method=method,
                     argocd_instance_label_key=label_key)


def _argocd(value: Any, where: str) -> tuple[str, str]:
    if value is None:
        return "", ""
    block = _mapping(value, where, "argocd")
    _no_unknown_keys(block, _ARGOCD_KEYS, where, "argocd")
    method = _string(block.get("trackingMethod"), where, "argocd.trackingMethod")
    if method and method not in _TRACKING_METHODS:
        raise ConfigError(f"{where}: argocd.trackingMethod: must be one of {', '.join(_TRACKING_METHODS)}")
    label_key = _string(block.get("instanceLabelKey"), where, "argocd.instanceLabelKey")
    if label_key and not _LABEL_KEY.match(label_key):
        raise ConfigError(f"{where}: argocd.instanceLabelKey: not a valid label key")
    return method, label_key


def _repository(raw: Any, where: str, at: str, default_message: str | None) -> RepositoryConfig:
    entry = _mapping(raw, where, at)
    _no_unknown_keys(entry, _REPO_KEYS, where, at)
    name = _string(entry.get("name"), where, f"{at}.name", required=True)
    if not _NAME.match(name):
        raise ConfigError(
            f"{where}: {at}.name: use lower-case letters, digits, '.', '_' and '-' "
            "(at most 63 characters)"
        )
    url = _string(entry.get("url"), where, f"{at}.url", required=True)
    if any(ch.isspace() for ch in url):
        raise ConfigError(f"{where}: {at}.url: must not contain whitespace")
    aliases = _aliases(entry.get("aliases"), where, f"{at}.aliases", name=name)
    branch = _string(entry.get("branch"), where, f"{at}.branch") or "main"
    if not _valid_branch(branch):
        raise ConfigError(f"{where}: {at}.branch: not a valid branch name")
    token_file = _string(entry.get("tokenFile"), where, f"{at}.tokenFile")
    ssh_key_file = _string(entry.get("sshKeyFile"), where, f"{at}.sshKeyFile")
    known_hosts_file = _string(entry.get("knownHostsFile"), where, f"{at}.knownHostsFile")
    if token_file and ssh_key_file:
        raise ConfigError(f"{where}: {at}: give either tokenFile or sshKeyFile, not both")
    github_app = _github_app(entry.get("githubApp"), where, f"{at}.githubApp", url=url)
    if github_app is not None and token_file:
        raise ConfigError(f"{where}: {at}: give either tokenFile or githubApp, not both")
    author = CommitAuthor()
    if entry.get("author") is not None:
        raw_author = _mapping(entry["author"], where, f"{at}.author")
        _no_unknown_keys(raw_author, _AUTHOR_KEYS, where, f"{at}.author")
        author_name = _string(raw_author.get("name"), where, f"{at}.author.name") or author.name
        email = _string(raw_author.get("email"), where, f"{at}.author.email") or author.email
        if not _EMAIL.match(email):
            raise ConfigError(f"{where}: {at}.author.email: not an e-mail address")
        if any(ch in author_name for ch in "<>\n"):
            raise ConfigError(f"{where}: {at}.author.name: must not contain '<', '>' or newlines")
        author = CommitAuthor(author_name, email)
    paths = _paths(entry.get("paths"), where, f"{at}.paths")
    message = _template(entry.get("commitMessage"), where, f"{at}.commitMessage")
    pull_request = _pull_request(entry.get("pullRequest"), where, f"{at}.pullRequest", url=url,
                                 token_file=token_file, github_app=github_app is not None)
    signing_key = _signing_key(entry.get("signingKey"), where, f"{at}.signingKey")
    return RepositoryConfig(
        name=name,
        url=url,
        branch=branch,
        token_file=token_file,
        username=_string(entry.get("username"), where, f"{at}.username"),
        ssh_key_file=ssh_key_file,
        known_hosts_file=known_hosts_file,
        author=author,
        paths=paths,
        commit_message=message or default_message or DEFAULT_COMMIT_MESSAGE,
        pull_request=pull_request,
        sign_commits=signing_key is not None or _bool(entry.get("signCommits"), where, f"{at}.signCommits",
                                                      default=False),
        signing_key=signing_key,
        github_app=github_app,
        author_given=entry.get("author") is not None,
        tenants=_tenants(entry.get("tenants"), where, f"{at}.tenants"),
        annotation_keys=_annotation_keys(entry.get("annotationKeys"), where, f"{at}.annotationKeys"),
        aliases=aliases,
    )


def _aliases(value: Any, where: str, at: str, *, name: str) -> tuple[str, ...]:
    """The entry's ``aliases``, each valid (:func:`alias_problem`).

    One naming the entry's own ``url``, or another alias, by the same rule is harmless and
    kept (``git@h:o/r`` and ``ssh://git@h/o/r`` are one spelling for Argo CD).
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {at}: must be a list of URLs (repository {name})")
    if len(value) > MAX_ALIASES:
        raise ConfigError(f"{where}: {at}: at most {MAX_ALIASES} aliases (repository {name})")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ConfigError(f"{where}: {at}[{i}]: must be a string (repository {name})")
        problem = alias_problem(item.strip())
        if problem is not None:
            raise ConfigError(f"{where}: {at}[{i}]: {problem} (repository {name})")
    return tuple(item.strip() for item in value)


def _check_aliases(repos: Sequence[RepositoryConfig], where: str) -> None:
    """No alias names (as ``git.SameURL`` decides) another repository's ``url`` or alias.

    Entries with the same ``url`` (one per branch) are one repository: they may repeat
    each other's aliases.
    """
    owners: dict[str, tuple[str, str, str]] = {}  # spelling → (remote, field, repository name)
    for i, repo in enumerate(repos):
        remote = normalize_git_url_allow_invalid(repo.url)
        owners.setdefault(remote, (remote, f"repositories[{i}].url", repo.name))
    for i, repo in enumerate(repos):
        remote = normalize_git_url_allow_invalid(repo.url)
        for j, alias in enumerate(repo.aliases):
            at = f"repositories[{i}].aliases[{j}]"
            owner = owners.setdefault(normalize_git_url(alias), (remote, at, repo.name))
            if owner[0] != remote:
                raise ConfigError(
                    f"{where}: {at} (repository {repo.name}) names the same repository as {owner[1]} "
                    f"(repository {owner[2]}): one remote is one repository entry (one per branch); "
                    "remove the alias or merge the entries")


def _tenants(value: Any, where: str, at: str) -> tuple[TenantRule, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: {at}: must be a non-empty list (omit it to let every namespace in)")
    rules: list[TenantRule] = []
    for i, raw in enumerate(value):
        entry = _mapping(raw, where, f"{at}[{i}]")
        _no_unknown_keys(entry, _TENANT_KEYS, where, f"{at}[{i}]")
        namespaces = _globs(entry.get("namespaces"), where, f"{at}[{i}].namespaces", _namespace_glob)
        paths = _globs(entry.get("paths"), where, f"{at}[{i}].paths", _path_glob)
        document_namespace = _string(entry.get("documentNamespace"), where, f"{at}[{i}].documentNamespace")
        if document_namespace and not _NAMESPACE.match(document_namespace):
            raise ConfigError(f"{where}: {at}[{i}].documentNamespace: not a valid namespace name")
        rules.append(TenantRule(namespaces, paths, document_namespace or None))
    return tuple(rules)


def _globs(value: Any, where: str, at: str, check: Callable[[str], str | None]) -> tuple[Glob, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: {at}: must be a non-empty list of patterns")
    out: list[Glob] = []
    for i, item in enumerate(value):
        text = _string(item, where, f"{at}[{i}]", required=True)
        problem = check(text)
        if problem is None:
            try:
                out.append(compile_glob(text.removeprefix("./")))
                continue
            except GlobError:
                problem = "'**' must be a whole path segment"
        raise ConfigError(f"{where}: {at}[{i}]: {problem}")
    return tuple(out)


def _namespace_glob(text: str) -> str | None:
    if not _NAMESPACE_GLOB.match(text):
        return "a namespace name or glob: lower-case letters, digits, '-', '*' and '?'"
    return None


def _path_glob(text: str) -> str | None:
    clean = text.removeprefix("./")
    segments = clean.split("/")
    if clean.startswith("/") or "\\" in clean or any(s in ("", ".", "..") for s in segments):
        return "must be a relative path pattern inside the repository (no '..', '.', '//' or '\\')"
    return None


def repository_from_url(url: str, host: str) -> str:
    """The host's name for the repository at clone URL ``url``; ``""`` if it has none.

    GitLab: the whole path (``group/sub/project``); other hosts: the last two path
    segments (``owner/name``), so a server installed under a sub-path still works.

    >>> repository_from_url("git@gitlab.example.com:group/sub/app.git", "gitlab")
    'group/sub/app'
    >>> repository_from_url("https://git.example.com/gitea/org/app.git", "gitea")
    'org/app'
    """
    if host == "azure":
        located = azure_location(url)
        return located[1] if located is not None else ""
    normalized = host_and_path(url)
    _, _, path = normalized.partition("/")
    segments = [s for s in path.split("/") if s]
    if host == "gitlab":
        return "/".join(segments) if len(segments) >= 2 else ""
    return "/".join(segments[-2:]) if len(segments) >= 2 else ""


def _github_app(value: Any, where: str, at: str, *, url: str) -> GitHubAppConfig | None:
    if value is None:
        return None
    entry = _mapping(value, where, at)
    _no_unknown_keys(entry, _APP_KEYS, where, at)
    raw_id = entry.get("appId")
    app_id = str(raw_id).strip() if isinstance(raw_id, (int, str)) and not isinstance(raw_id, bool) else ""
    if not _APP_ID.match(app_id):
        raise ConfigError(f"{where}: {at}.appId: the App's numeric id (or its client id, Iv...) is required")
    key_file = _string(entry.get("privateKeyFile"), where, f"{at}.privateKeyFile", required=True)
    installation = entry.get("installationId")
    if installation is not None and (isinstance(installation, bool) or not isinstance(installation, int)
                                     or installation < 1):
        raise ConfigError(f"{where}: {at}.installationId: must be a positive integer")
    api_url = _api_url(_string(entry.get("apiUrl"), where, f"{at}.apiUrl"), where, f"{at}.apiUrl",
                       host="github", url=url)
    repository = repository_from_url(url, "github")
    _check_repository(repository, where, f"{at} (the repository from url)", host="github")
    return GitHubAppConfig(app_id=app_id, private_key_file=key_file, api_url=api_url,
                           installation_id=installation or 0, repository=repository)


def _signing_key(value: Any, where: str, at: str) -> SigningKeyConfig | None:
    if value is None:
        return None
    entry = _mapping(value, where, at)
    _no_unknown_keys(entry, _SIGNING_KEYS, where, at)
    key_file = _string(entry.get("file"), where, f"{at}.file", required=True)
    fmt = _string(entry.get("format"), where, f"{at}.format") or "ssh"
    if fmt not in SIGNING_FORMATS:
        raise ConfigError(f"{where}: {at}.format: must be one of {', '.join(SIGNING_FORMATS)}")
    return SigningKeyConfig(file=key_file, format=fmt)


def _pull_request(value: Any, where: str, at: str, *, url: str, token_file: str,
                  github_app: bool = False) -> PullRequestConfig | None:
    if value is None:
        return None
    entry = _mapping(value, where, at)
    _no_unknown_keys(entry, _PR_KEYS, where, at)
    enabled = _bool(entry.get("enabled"), where, f"{at}.enabled", default=True)
    if not enabled:
        return None  # the Helm chart renders {enabled: false} for "no pull requests"
    host = _string(entry.get("host"), where, f"{at}.host", required=True).lower()
    if host not in PR_HOSTS:
        raise ConfigError(f"{where}: {at}.host: must be one of {', '.join(PR_HOSTS)}")
    api_url = _api_url(_string(entry.get("apiUrl"), where, f"{at}.apiUrl"), where, f"{at}.apiUrl",
                       host=host, url=url)
    api_token_file = _string(entry.get("tokenFile"), where, f"{at}.tokenFile") or token_file
    if github_app and host != "github":
        raise ConfigError(f"{where}: {at}.host: a repository with githubApp opens pull requests on github, "
                          f"not {host}")
    if not api_token_file and not github_app:
        raise ConfigError(
            f"{where}: {at}.tokenFile: is required when the repository has no tokenFile "
            "(the host's API needs a token even when git uses SSH)")
    repository = _string(entry.get("repository"), where, f"{at}.repository") or repository_from_url(url, host)
    _check_repository(repository, where, f"{at}.repository", host=host)
    labels = _labels(entry.get("labels"), where, f"{at}.labels")
    auto_merge = _bool(entry.get("autoMerge"), where, f"{at}.autoMerge", default=False)
    grouping = _string(entry.get("grouping"), where, f"{at}.grouping")
    if grouping and grouping not in PR_GROUPINGS:
        raise ConfigError(f"{where}: {at}.grouping: must be one of {', '.join(PR_GROUPINGS)}")
    return PullRequestConfig(host=host, api_url=api_url, token_file=api_token_file, repository=repository,
                             labels=labels, auto_merge=auto_merge, grouping=grouping,
                             **_host_options(entry, where, at, host=host))


def _host_options(entry: Mapping[str, Any], where: str, at: str, *, host: str) -> dict[str, Any]:
    """``username`` (Bitbucket), ``removeSourceBranch`` and ``squash`` (GitLab), each on its host only."""
    username = _string(entry.get("username"), where, f"{at}.username")
    if username and host != "bitbucket":
        raise ConfigError(f"{where}: {at}.username: is only used with host bitbucket (HTTP Basic); "
                          f"{host} takes the token alone")
    if username and (any(ch.isspace() or ch == ":" for ch in username) or len(username) > 254):
        raise ConfigError(f"{where}: {at}.username: no whitespace or ':', at most 254 characters")
    options: dict[str, Any] = {"username": username}
    for key, name, hosts in (("removeSourceBranch", "remove_source_branch", {"gitlab": "GitLab",
                                                                              "azure": "Azure DevOps"}),
                             ("squash", "squash", {"gitlab": "GitLab"})):
        value = _bool(entry.get(key), where, f"{at}.{key}", default=False)
        if entry.get(key) is not None and host not in hosts:
            raise ConfigError(f"{where}: {at}.{key}: is a {' and '.join(hosts.values())} setting; "
                              f"{host} has no such option")
        options[name] = value
    strategy = _string(entry.get("mergeStrategy"), where, f"{at}.mergeStrategy")
    if strategy and host != "azure":
        raise ConfigError(f"{where}: {at}.mergeStrategy: is an Azure DevOps setting; "
                          f"{host} has no such option")
    if strategy and strategy not in AZURE_MERGE_STRATEGIES:
        raise ConfigError(f"{where}: {at}.mergeStrategy: must be one of {', '.join(AZURE_MERGE_STRATEGIES)}")
    options["merge_strategy"] = strategy
    return options


def _api_url(given: str, where: str, at: str, *, host: str, url: str) -> str:
    if given:
        parts = urlsplit(given)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{where}: {at}: must be an http:// or https:// URL")
        if parts.username or parts.password:
            raise ConfigError(f"{where}: {at}: must not carry credentials (use tokenFile)")
        if parts.query or parts.fragment or any(ch.isspace() for ch in given):
            raise ConfigError(f"{where}: {at}: must not have a query, fragment or whitespace")
        return given.rstrip("/")
    if host == "azure":
        located = azure_location(url)
        if located is None:
            raise ConfigError(f"{where}: {at}: is required for azure when the url is not an Azure Repos "
                              "URL (.../_git/<repo> or ssh v3/<org>/<project>/<repo>)")
        return located[0]
    normalized = host_and_path(url)
    origin_host = normalized.partition("/")[0]
    public = _PUBLIC_API.get((host, origin_host.lower()))
    if public:
        return public
    prefix = _API_PREFIX.get(host)
    if prefix is None or not origin_host or "/" not in normalized:
        raise ConfigError(f"{where}: {at}: is required for {host} (it cannot be derived from the url)")
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    scheme = scheme if scheme in ("http", "https") else "https"
    return f"{scheme}://{origin_host}{prefix}"


def azure_location(url: str) -> tuple[str, str] | None:
    """``(api_url, "project/repo")`` of an Azure Repos clone URL, ``None`` for another URL.

    >>> azure_location("https://acme@dev.azure.com/acme/Fleet%20Ops/_git/fleet")
    ('https://dev.azure.com/acme', 'Fleet Ops/fleet')
    >>> azure_location("git@ssh.dev.azure.com:v3/acme/Fleet%20Ops/fleet")
    ('https://dev.azure.com/acme', 'Fleet Ops/fleet')
    >>> azure_location("https://tfs.acme.example/tfs/DefaultCollection/ops/_git/fleet")
    ('https://tfs.acme.example/tfs/DefaultCollection', 'ops/fleet')
    """
    host, _, path = host_and_path(url).partition("/")
    segments = [urllib.parse.unquote(s) for s in path.split("/") if s]
    if host in ("ssh.dev.azure.com", "vs-ssh.visualstudio.com"):
        if len(segments) != 4 or segments[0].lower() != "v3":
            return None
        _, org, project, repo = segments
        if host == "ssh.dev.azure.com":
            return f"https://dev.azure.com/{org}", f"{project}/{repo}"
        return f"https://{org}.visualstudio.com", f"{project}/{repo}"
    lowered = [s.lower() for s in segments]
    if "_git" not in lowered:
        return None
    at = lowered.index("_git")
    if at + 2 != len(segments) or at == 0:
        return None
    repo = segments[at + 1]
    prefix = segments[: at - 1]
    project = segments[at - 1]
    if host == "dev.azure.com" and at == 1:  # https://dev.azure.com/org/_git/repo: the project's own repo
        prefix, project = segments[:1], repo
    scheme = "http" if url.strip().lower().startswith("http://") else "https"
    origin = f"{scheme}://{host}" + "".join("/" + urllib.parse.quote(s) for s in prefix)
    return origin, f"{project}/{repo}"


def _check_repository(repository: str, where: str, at: str, *, host: str) -> None:
    segments = repository.strip("/").split("/") if repository else []
    if host == "azure":
        if len(segments) != 2 or not all(_AZURE_SEGMENT.match(s) for s in segments):
            raise ConfigError(f"{where}: {at}: is required (it cannot be derived from the url); "
                              "use project/repository")
        return
    if not segments or not all(_REPO_SEGMENT.match(s) for s in segments):
        raise ConfigError(
            f"{where}: {at}: is required (it cannot be derived from the url); "
            + ("use the project path, e.g. group/project" if host == "gitlab" else "use owner/name"))
    if host == "gitlab" and len(segments) < 2:
        raise ConfigError(f"{where}: {at}: use the project path, e.g. group/project")
    if host != "gitlab" and len(segments) != 2:
        raise ConfigError(f"{where}: {at}: use owner/name")


def _annotation_keys(value: Any, where: str, at: str) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_ANNOTATION_KEYS
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: {at}: must be a non-empty list of map keys")
    out: list[str] = []
    for i, item in enumerate(value):
        text = _string(item, where, f"{at}[{i}]", required=True)
        if len(text) > 253 or any(ch.isspace() or not ch.isprintable() for ch in text):
            raise ConfigError(f"{where}: {at}[{i}]: a map key without whitespace, at most 253 characters")
        out.append(text)
    return tuple(dict.fromkeys(out))


def _labels(value: Any, where: str, at: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {at}: must be a list of label names")
    out: list[str] = []
    for i, item in enumerate(value):
        text = _string(item, where, f"{at}[{i}]", required=True)
        if not _LABEL.match(text):
            raise ConfigError(f"{where}: {at}[{i}]: at most 100 characters, no commas or newlines")
        if text not in out:
            out.append(text)
    return tuple(out)


def _bool(value: Any, where: str, at: str, *, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {at}: must be true or false")
    return value


def _mapping(value: Any, where: str, at: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: {at}: must be a map")
    return value


def _no_unknown_keys(value: Mapping[str, Any], allowed: frozenset[str], where: str, at: str) -> None:
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        prefix = f"{at}." if at else ""
        raise ConfigError(
            f"{where}: unknown field {prefix}{unknown[0]} (allowed: {', '.join(sorted(allowed))})"
        )


def _string(value: Any, where: str, at: str, *, required: bool = False) -> str:
    if value is None:
        if required:
            raise ConfigError(f"{where}: {at}: is required")
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {at}: must be a string")
    text = value.strip()
    if required and not text:
        raise ConfigError(f"{where}: {at}: must not be empty")
    return text


def _paths(value: Any, where: str, at: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {at}: must be a list of directories")
    out: list[str] = []
    for i, item in enumerate(value):
        text = _string(item, where, f"{at}[{i}]", required=True)
        pure = PurePosixPath(text.removeprefix("./"))
        if pure.is_absolute() or ".." in pure.parts or "\\" in text:
            raise ConfigError(f"{where}: {at}[{i}]: must be a relative path inside the repository")
        clean = pure.as_posix().strip("/")
        if clean in ("", "."):
            return ()  # the whole repository
        out.append(clean)
    return tuple(out)


def _template(value: Any, where: str, at: str) -> str | None:
    if value is None:
        return None
    text = _string(value, where, at, required=True)
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError:
        raise ConfigError(f"{where}: {at}: not a valid template (unbalanced braces)") from None
    for name in fields:
        if name not in _TEMPLATE_FIELDS:
            raise ConfigError(
                f"{where}: {at}: unknown field {{{name}}} "
                f"(allowed: {', '.join('{' + f + '}' for f in sorted(_TEMPLATE_FIELDS))})"
            )
    if "\n" in text.strip():
        raise ConfigError(f"{where}: {at}: must be a single line (it is the commit subject)")
    return text


def _valid_branch(name: str) -> bool:
    return not (
        name.startswith(("-", "/"))
        or name.endswith(("/", ".", ".lock"))
        or ".." in name
        or "//" in name
        or "@{" in name
        or any(ch in name for ch in " ~^:?*[\\\x7f")
        or any(ord(ch) < 32 for ch in name)
    )

