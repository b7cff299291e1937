"""A Volcano Job's ``spec.volumes``: the claims its pods mount, made when the Job asks.

Each entry mounts one PersistentVolumeClaim at ``mountPath`` in every container of every
pod of the Job (Volcano's ``createJobPod``):

- with ``volumeClaimName``, the claim must exist; until it does the Job stays Pending
  (no PodGroup, no pods) and the controller says so in a ``PVCError`` Event, as
  Volcano's controller does, and tries again a few seconds later;
- with ``volumeClaim`` (a claim spec), the controller creates the claim, owned by the
  Job (a controller ownerReference, so it goes when the Job is deleted), named
  ``<job>-pvc-<12 characters>`` like Volcano's. Volcano draws the 12 characters at
  random and writes the name back into the Job's spec; pumice derives them from the
  Job's uid and the entry's place (:func:`generated_name`), so that the name is the
  same on every reconcile without a write to the spec, and two runs of a simulation
  make the same claims. A claim of that name that the Job does not own (another
  user's) is skipped for the next name, as Volcano does.

Either way the claim is listed in the Job's ``status.controlledResources`` as
``volume-pvc-<claim>: <claim>``, as in Volcano.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pumice.api.parse import copy_tree
from pumice.controllers.job.pods import owner_reference
from pumice.controllers.job.spec import JobSpec
from pumice.controllers.store import Store, controller_of

#: Volcano's alphabet for generated names.
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
#: How many names :func:`ensure_claims` tries for one entry before giving up.
_ATTEMPTS = 16


class VolumeError(Exception):
    """A claim the Job names does not exist (or none of the generated names is free)."""


@dataclass(frozen=True, slots=True)
class Mount:
    """A claim mounted at ``path`` under the pod volume ``volume``."""

    path: str
    claim: str
    volume: str


def _suffix(seed: str, length: int = 12) -> str:
    digest = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:16], "big")
    out = []
    for _ in range(length):
        digest, r = divmod(digest, len(_ALPHABET))
        out.append(_ALPHABET[r])
    return "".join(out)


def generated_name(spec: JobSpec, index: int, attempt: int = 0) -> str:
    """The claim made for entry ``index`` of ``spec.volumes``: ``<job>-pvc-<12>``."""
    return f"{spec.name}-pvc-{_suffix(f'{spec.uid or spec.key}/{index}/{attempt}')}"


def volume_name(spec: JobSpec, claim: str) -> str:
    """The pod volume a claim is mounted under: ``<job>-<12>``, at most 63 characters."""
    return f"{spec.name[:50].rstrip('-.')}-{_suffix(f'{spec.name}/{claim}')}"


def _claim_object(spec: JobSpec, name: str, claim: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": spec.namespace,
            "ownerReferences": [owner_reference(spec)],
        },
        "spec": copy_tree(dict(claim)),
    }


def ensure_claims(
    spec: JobSpec, store: Store, resources: dict[str, str], *, initiate: bool = True
) -> list[Mount]:
    """The Job's mounts, its claims created where it describes them; each claim noted
    in ``resources`` (``status.controlledResources``). VolumeError when a claim it names
    is missing. With ``initiate`` False (a Job that started: Volcano checks its claims
    when it initiates the Job only) nothing is checked or created: the names are
    resolved for the pods made again."""
    mounts: list[Mount] = []
    for i, v in enumerate(spec.volumes):
        name = v.claim_name
        if not name:
            if v.claim is None:
                continue  # (refused by validation; nothing to mount)
            for attempt in range(_ATTEMPTS):
                candidate = generated_name(spec, i, attempt)
                have = store.get("PersistentVolumeClaim", f"{spec.namespace}/{candidate}")
                if have is None:
                    if not initiate:
                        name = generated_name(spec, i)
                        break
                    made = store.create(_claim_object(spec, candidate, v.claim))
                    if made is None:  # (made meanwhile: look again next reconcile)
                        raise VolumeError(f"claim {candidate} appeared while being created")
                    name = candidate
                    break
                ref = controller_of(have)
                if ref is not None and ref.get("uid") == spec.uid:
                    name = candidate
                    break
            else:
                if not initiate:
                    continue
                raise VolumeError(
                    f"volumes[{i}]: every name tried for its claim ({spec.name}-pvc-...) is "
                    "taken by a claim the Job does not own"
                )
        elif initiate and store.get("PersistentVolumeClaim", f"{spec.namespace}/{name}") is None:
            raise VolumeError(
                f"persistentvolumeclaim {name} (volumes[{i}], mounted at {v.mount_path}) is "
                "not found; the job stays Pending until it is created"
            )
        resources[f"volume-pvc-{name}"] = name
        mounts.append(Mount(v.mount_path, name, volume_name(spec, name)))
    return mounts


def mount(pod: dict[str, Any], mounts: Sequence[Mount]) -> None:
    """Add the claims as volumes of ``pod`` and mount them in each of its containers
    (a claim already a volume of the template is mounted once more, not added twice)."""
    if not mounts:
        return
    spec = pod.setdefault("spec", {})
    volumes = spec.setdefault("volumes", [])
    have = {
        (v.get("persistentVolumeClaim") or {}).get("claimName"): v.get("name")
        for v in volumes
        if isinstance(v, Mapping)
    }
    for m in mounts:
        name = have.get(m.claim)
        if name is None:
            name = m.volume
            volumes.append({"name": name, "persistentVolumeClaim": {"claimName": m.claim}})
            have[m.claim] = name
        for c in spec.get("containers") or ():
            c.setdefault("volumeMounts", []).append({"name": name, "mountPath": m.path})


__all__ = ["Mount", "VolumeError", "ensure_claims", "generated_name", "mount", "volume_name"]
