"""A rendered Deployment's pod, translated field by field into one ``podman run``.

What the kubelet would do with each field of the chart's pod template is done here with
podman's options, or the field is named in :data:`NOT_ON_ONE_NODE` with why it does not
apply to one container on one machine. Any other field is an error: when the chart grows a
field, this translation must learn it before the test passes again.

- ``securityContext`` (pod, then container): runAsUser/runAsGroup → ``--user``, fsGroup →
  ``--group-add`` and the group of Secret files, runAsNonRoot checked, readOnlyRootFilesystem
  → ``--read-only`` (and no tmpfs podman would add on its own), capabilities →
  ``--cap-drop``/``--cap-add``, allowPrivilegeEscalation false → ``no-new-privileges``,
  seccomp RuntimeDefault → podman's default profile.
- ``env``: ``value``, and ``fieldRef`` metadata.namespace / metadata.name.
- volumes: emptyDir → tmpfs (sizeLimit as its size), configMap (from the rendered
  ConfigMap, ``subPath`` as one file), secret (from the test's data, with ``defaultMode``
  and fsGroup); the ServiceAccount volume (automounted) from :func:`pod.service_account`.
- ``resources.limits`` → ``--memory`` / ``--cpus``; probes and the grace period are
  returned for the test to play the kubelet's part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pod import config_file, secret_volume

NOT_ON_ONE_NODE = {
    "pod": {"affinity", "nodeSelector", "tolerations", "topologySpreadConstraints", "priorityClassName",
            "imagePullSecrets",  # scheduling and pulling: one machine, a local image
            "serviceAccountName"},  # its token is the ServiceAccount volume the test mounts
    "container": {"name", "image", "imagePullPolicy",  # the image under test replaces the chart's
                  "ports"},  # the host's network: containerPort is the port on 127.0.0.1
}
_QUANTITY = re.compile(r"^(\d+)(Ki|Mi|Gi)?$")
_UNITS = {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


@dataclass(frozen=True)
class HttpProbe:
    path: str
    port: int
    initial_delay: int
    period: int
    timeout: int
    failure_threshold: int


@dataclass
class PodRun:
    """``podman run`` options and arguments for the pod's one container, and what the kubelet
    would check."""

    options: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    probes: dict[str, HttpProbe] = field(default_factory=dict)
    grace_seconds: int = 30  # terminationGracePeriodSeconds' default


def _bytes(quantity: str) -> int:
    match = _QUANTITY.match(str(quantity))
    if match is None:
        raise NotImplementedError(f"quantity {quantity!r} not translated")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _unknown(where: str, spec: Mapping[str, Any], known: set[str]) -> None:
    left = set(spec) - known
    if left:
        raise NotImplementedError(f"{where}: {sorted(left)} not translated to podman")


def translate(deployment: Mapping[str, Any], *, configmaps: Mapping[str, Mapping[str, str]],
              secrets: Mapping[str, Mapping[str, str]], pod_name: str, workdir: Path,
              service_account: list[str]) -> PodRun:
    """The podman run of ``deployment``'s single container; files are written under ``workdir``."""
    template = deployment["spec"]["template"]
    namespace = deployment["metadata"]["namespace"]
    pod = template["spec"]
    _unknown("pod spec", pod, {"containers", "securityContext", "volumes", "terminationGracePeriodSeconds",
                               "automountServiceAccountToken", *NOT_ON_ONE_NODE["pod"]})
    (container,) = pod["containers"]
    _unknown("container", container, {"args", "command", "env", "livenessProbe", "readinessProbe",
                                      "resources", "securityContext", "volumeMounts",
                                      *NOT_ON_ONE_NODE["container"]})
    run = PodRun(grace_seconds=int(pod.get("terminationGracePeriodSeconds", 30)))
    security = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    fs_group = _security(run, security)
    if pod.get("automountServiceAccountToken", True):
        run.options += service_account
    for env in container.get("env", []):
        run.options.append(f"--env={env['name']}={_env_value(env, namespace, pod_name)}")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    workdir.mkdir(parents=True)
    for index, mount in enumerate(container.get("volumeMounts", [])):
        run.options.append(_volume(volumes[mount["name"]], mount, configmaps, secrets,
                                   workdir / f"{index}-{mount['name']}", fs_group))
    _resources(run, container.get("resources", {}))
    ports = {p["name"]: int(p["containerPort"]) for p in container.get("ports", [])}
    for kind in ("livenessProbe", "readinessProbe"):
        if kind in container:
            run.probes[kind] = _probe(container[kind], ports)
    if container.get("command"):
        run.options.append(f"--entrypoint={container['command'][0]}")
        run.args += container["command"][1:]
    run.args += [str(a) for a in container.get("args", [])]
    return run


def _security(run: PodRun, security: Mapping[str, Any]) -> int | None:
    _unknown("securityContext", security, {"runAsUser", "runAsGroup", "fsGroup", "runAsNonRoot",
                                           "seccompProfile", "readOnlyRootFilesystem", "capabilities",
                                           "allowPrivilegeEscalation"})
    user, group = security.get("runAsUser"), security.get("runAsGroup")
    if security.get("runAsNonRoot"):
        assert user not in (None, 0), "runAsNonRoot needs a non-zero runAsUser the kubelet can check"
    if user is not None:
        run.options.append(f"--user={user}:{group if group is not None else 0}")
    fs_group = security.get("fsGroup")
    if fs_group is not None:
        run.options.append(f"--group-add={fs_group}")
    if security.get("readOnlyRootFilesystem"):
        run.options += ["--read-only", "--read-only-tmpfs=false"]
    capabilities = security.get("capabilities", {})
    _unknown("capabilities", capabilities, {"drop", "add"})
    run.options += [f"--cap-drop={c}" for c in capabilities.get("drop", [])]
    run.options += [f"--cap-add={c}" for c in capabilities.get("add", [])]
    if security.get("allowPrivilegeEscalation") is False:
        run.options.append("--security-opt=no-new-privileges")
    seccomp = security.get("seccompProfile", {}).get("type", "RuntimeDefault")
    if seccomp != "RuntimeDefault":
        raise NotImplementedError(f"seccompProfile {seccomp} not translated")
    return int(fs_group) if fs_group is not None else None


def _env_value(env: Mapping[str, Any], namespace: str, pod_name: str) -> str:
    if "value" in env:
        return str(env["value"])
    path = env.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    values = {"metadata.namespace": namespace, "metadata.name": pod_name}
    if path not in values:
        raise NotImplementedError(f"env {env['name']}: {env.get('valueFrom')} not translated")
    return values[path]


def _volume(volume: Mapping[str, Any], mount: Mapping[str, Any], configmaps: Mapping[str, Mapping[str, str]],
            secrets: Mapping[str, Mapping[str, str]], path: Path, fs_group: int | None) -> str:
    _unknown(f"volumeMount {mount['name']}", mount, {"name", "mountPath", "subPath", "readOnly"})
    target = mount["mountPath"]
    if "emptyDir" in volume:
        size = volume["emptyDir"].get("sizeLimit")
        # U: owned by the container's user (podman 4.3 takes no uid=/gid= for a tmpfs)
        return f"--tmpfs={target}:rw,U" + (f",size={_bytes(size)}" if size else "")
    if "configMap" in volume:
        data = configmaps[volume["configMap"]["name"]]
        if "subPath" not in mount:
            raise NotImplementedError("a whole ConfigMap directory is not translated")
        return config_file(path, data[mount["subPath"]], target)
    if "secret" in volume:
        if "subPath" in mount:
            raise NotImplementedError("a Secret subPath is not translated")
        data = secrets[volume["secret"]["secretName"]]
        mode = int(volume["secret"].get("defaultMode", 0o644))
        group = fs_group if fs_group is not None else 0
        return secret_volume(path, data, target, mode=mode, group=group)
    raise NotImplementedError(f"volume {volume['name']}: {sorted(volume)} not translated")


def _resources(run: PodRun, resources: Mapping[str, Any]) -> None:
    _unknown("resources", resources, {"limits", "requests"})  # requests only place the pod
    limits = resources.get("limits", {})
    _unknown("resources.limits", limits, {"memory", "cpu"})
    if "memory" in limits:
        run.options.append(f"--memory={_bytes(limits['memory'])}")
    if "cpu" in limits:
        cpu = str(limits["cpu"])
        run.options.append(f"--cpus={int(cpu[:-1]) / 1000 if cpu.endswith('m') else float(cpu)}")


def _probe(probe: Mapping[str, Any], ports: Mapping[str, int]) -> HttpProbe:
    _unknown("probe", probe, {"httpGet", "initialDelaySeconds", "periodSeconds", "timeoutSeconds",
                              "failureThreshold", "successThreshold"})
    get = probe["httpGet"]
    _unknown("httpGet", get, {"path", "port"})
    port = get["port"]
    return HttpProbe(path=get["path"], port=ports[port] if isinstance(port, str) else int(port),
                     initial_delay=int(probe.get("initialDelaySeconds", 0)),
                     period=int(probe.get("periodSeconds", 10)), timeout=int(probe.get("timeoutSeconds", 1)),
                     failure_threshold=int(probe.get("failureThreshold", 3)))
