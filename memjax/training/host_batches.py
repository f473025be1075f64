"""Host-local rows <-> global arrays for the trainer loop on one or many hosts.

On several hosts every process rolls out its own shard of the prompts and packs its own rows;
the train step, the old/reference log-probs and the critic's values run on global arrays over
the whole mesh, whose rows are host 0's rows, then host 1's, and so on
(`memjax.distributed.global_batch`). These helpers move rows across that boundary and reduce
the few statistics that must be global (row counts, rewards, advantage whitening).

On one host every function is the identity on numpy arrays (or a plain gather of one), so a
single-host run is exactly what it was without them.
"""

from __future__ import annotations

import numpy as np

from memjax import distributed


def multi_host() -> bool:
    return distributed.process_count() > 1


def gather(x) -> np.ndarray:
    """[n_processes, ...]: every host's `x` (same shape on every host), in process order."""
    x = np.asarray(x)
    if not multi_host():
        return x[None]
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=False))


def max_over_hosts(n: int) -> int:
    return int(gather(np.int64(n)).max())


def pad_rows(batch: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
    """Appends empty rows (zeros; trajectory -1) so that every host holds `rows` rows: a global
    array needs the same number from each host. Empty rows have no trainable token."""
    out = {}
    for k, v in batch.items():
        v = np.asarray(v)
        if v.ndim == 0 or v.shape[0] >= rows:
            out[k] = v
            continue
        fill = -1 if k == "trajectory" else 0
        extra = np.full((rows - v.shape[0], *v.shape[1:]), fill, v.dtype)
        out[k] = np.concatenate([v, extra])
    return out


def to_global(local: dict[str, np.ndarray], mesh, rules) -> dict:
    """This host's rows -> global jax.Arrays over the mesh (several hosts); else unchanged."""
    if not multi_host():
        return local
    if mesh is None:
        raise ValueError("a multi-host run needs config.mesh (the global device mesh)")
    return distributed.global_batch(local, mesh, rules)


def to_local(x, mesh, rules) -> np.ndarray:
    """A row-sharded global array -> this host's rows as numpy (the inverse of `to_global`)."""
    if not multi_host():
        return np.asarray(x)
    from jax.experimental import multihost_utils

    from memjax.parallel import logical_to_spec, normalize_rules

    axes = ("batch", "seq")[: x.ndim] + (None,) * max(0, x.ndim - 2)
    spec = logical_to_spec(axes, normalize_rules(rules), x.shape, mesh)
    return np.asarray(multihost_utils.global_array_to_host_local_array(x, mesh, spec))


def whiten_global(adv: np.ndarray, mask: np.ndarray, whiten) -> np.ndarray:
    """`whiten(adv, mask)` with its statistics over every host's rows; returns this host's."""
    if not multi_host():
        return np.asarray(whiten(adv, mask))
    all_adv, all_mask = gather(adv), gather(mask)  # [P, B, T]
    P, B, T = all_adv.shape
    out = np.asarray(whiten(all_adv.reshape(P * B, T), all_mask.reshape(P * B, T)))
    return out.reshape(P, B, T)[distributed.process_index()]


__all__ = [
    "multi_host",
    "gather",
    "max_over_hosts",
    "pad_rows",
    "to_global",
    "to_local",
    "whiten_global",
]
