"""Ray for the trainer's actors: join the cluster at an address, or start a local one, once per process."""

from __future__ import annotations


def ensure_ray(address: str | None = None) -> None:
    """Connect this process to Ray unless it already is: the cluster at ``address`` ("auto", "ray://head:10001"),
    or a local one (no dashboard, our logging left alone)."""
    import ray

    if ray.is_initialized():
        return
    local = {"include_dashboard": False} if address is None else {}  # a running cluster keeps its own settings
    ray.init(address=address, log_to_driver=False, configure_logging=False, **local)
