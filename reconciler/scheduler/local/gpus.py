"""Which GPUs the local backend may hand out: those declared, else those ``nvidia-smi`` lists.

A GPU is known by its device id, the value ``CUDA_VISIBLE_DEVICES`` takes: ``0``, ``1``...
(or a ``GPU-<uuid>`` or ``MIG-<uuid>``, which CUDA accepts too). ``RECON_LOCAL_GPUS``
declares them:

- a count, ``RECON_LOCAL_GPUS=2``: devices ``0`` and ``1``; ``0`` declares none;
- a list, ``RECON_LOCAL_GPUS=1,3``: those devices, say the two of four this project may use
  (``3,`` is device 3 alone);
- ``none``: no GPU, whatever the machine has.

Left unset (or empty), recon.yaml's ``local: {gpus: ...}`` declares them (a count or a
list of devices; the machine's variable wins, as it knows the machine). Where neither
does, they are found: each ``GPU <n>:`` line of ``nvidia-smi -L`` is device ``n``; no
``nvidia-smi`` on PATH, or one that fails, finds none. Nothing else is guessed: a machine
that says nothing has no GPU for recon, so a run asking for one is refused by the plan
rather than run without it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping

GPUS_VARIABLE = "RECON_LOCAL_GPUS"
NVIDIA_SMI_SECONDS = 10.0
_LISTED = re.compile(r"^GPU (\d+):", re.MULTILINE)
# An index, or a GPU's or MIG device's UUID as nvidia-smi -L shows it.
_DEVICE = re.compile(r"^(?:\d+|(?:GPU|MIG)-[A-Za-z0-9/-]+)$")


class GpuDeclarationError(ValueError):
    """``RECON_LOCAL_GPUS`` holds something that is not a count, a list of devices or none."""


def declared_gpus(text: str) -> tuple[str, ...]:
    """The devices ``RECON_LOCAL_GPUS=text`` declares (not empty: empty means "find them")."""
    value = text.strip()
    if value.lower() == "none":
        return ()
    if value.isdigit():
        return tuple(str(index) for index in range(int(value)))
    # A list may end with a comma: ``3,`` is device 3 alone (``3`` is three GPUs).
    devices = tuple(device.strip() for device in value.removesuffix(",").split(","))
    if not all(_DEVICE.match(device) for device in devices) or len(set(devices)) < len(devices):
        raise GpuDeclarationError(
            f"{GPUS_VARIABLE}={text!r}: give a number of GPUs (2), the devices' ids (0,1), or none"
        )
    return devices


def found_gpus() -> tuple[str, ...]:
    """The devices ``nvidia-smi -L`` lists; none where it is missing or fails."""
    command = shutil.which("nvidia-smi")
    if command is None:
        return ()
    try:
        listed = subprocess.run(
            [command, "-L"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if listed.returncode != 0:
        return ()
    return tuple(dict.fromkeys(_LISTED.findall(listed.stdout)))


def machine_gpus(
    environ: Mapping[str, str], project: tuple[str, ...] | None = None
) -> tuple[str, ...]:
    """The GPUs ``environ`` declares, else those the project declares (recon.yaml's
    ``local.gpus``), else those found on this machine."""
    text = environ.get(GPUS_VARIABLE, "")
    if text.strip():
        return declared_gpus(text)
    return project if project is not None else found_gpus()
