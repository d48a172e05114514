"""Build the official client's ``ApiClient`` the way kubectl finds the cluster."""

from __future__ import annotations

from kubernetes import config as kube_config
from kubernetes.client import ApiClient, Configuration

from gitops_reloader.errors import ConfigError


def load_api_client(kubeconfig: str, *, pool_size: int = 16) -> ApiClient:
    """From a kubeconfig file (resolved by ``config.py``), or in-cluster when it is ""."""
    configuration = Configuration()
    try:
        if kubeconfig:
            kube_config.load_kube_config(config_file=kubeconfig,
                                         client_configuration=configuration)
        else:
            kube_config.load_incluster_config(client_configuration=configuration)
    except kube_config.ConfigException as exc:
        where = kubeconfig or "in-cluster service account"
        raise ConfigError(f"cannot load Kubernetes configuration from {where}: {exc}") from None
    configuration.connection_pool_maxsize = pool_size
    return ApiClient(configuration)
