"""One table of accelerators: TPU generations and common NVIDIA GPUs, with the
memory a program may use on one device.

Names: a TPU generation by its short name (``v4``, ``v5e``, ``v5p``, ``v6e``,
``v7x``), a topology (``v5e:2x2``) or JAX's ``device_kind`` (``TPU v5 lite``);
a GPU by its short name (``h100``, ``h200``, ``a100-40g``) or JAX's
``device_kind`` (``NVIDIA H200``). :func:`lookup` accepts all of them.

Usable bytes:

- TPU: the HBM XLA:TPU's compiler says a program may use on one device
  (its compile log's "program HBM usage: ... / 15.75G" and its out-of-memory
  reports' "Used ... of 15.75G hbm", printed to 0.01G: ``reported``) for v4,
  v5e, v5p and v6e; the published capacity per chip for the others
  (``spec``). ``--limit`` sets an exact figure.
- GPU: jax's allocator takes 75% of the device's memory unless
  ``XLA_PYTHON_CLIENT_MEM_FRACTION`` (or ``XLA_PYTHON_CLIENT_PREALLOCATE=false``)
  says otherwise. Where a real device reported its ``bytes_limit`` the table
  holds that figure (``measured``); else 75% of the nominal capacity
  (``estimated``). :func:`usable_bytes` takes another fraction.
"""

from typing import Dict, NamedTuple, Optional

from .errors import ShapeValueError

__all__ = ["Device", "DEVICES", "TPU_ALIASES", "TPU_GENERATIONS", "tpu_generation", "lookup",
           "usable_bytes", "JAX_GPU_FRACTION"]

GiB = 1 << 30
GB = 10 ** 9

#: the share of a GPU's memory jax's allocator takes by default
JAX_GPU_FRACTION = 0.75


class Device(NamedTuple):
    """One accelerator: ``name`` (short), ``platform`` (``tpu``/``gpu``),
    ``kind`` (JAX's ``device_kind``), ``memory_bytes`` (the device's memory),
    ``usable_bytes`` (what one program may use with jax's defaults) and
    ``basis`` (``reported``, ``spec``, ``measured`` or ``estimated``: where
    ``usable_bytes`` comes from)."""

    name: str
    platform: str
    kind: str
    memory_bytes: int
    usable_bytes: int
    basis: str


def _tpu(name, kind, gib, reported_gib=None):
    if reported_gib is not None:
        return Device(name, "tpu", kind, gib * GiB, int(reported_gib * GiB), "reported")
    return Device(name, "tpu", kind, gib * GiB, gib * GiB, "spec")


def _gpu(name, kind, memory, measured=None):
    if measured is not None:
        return Device(name, "gpu", kind, memory, measured, "measured")
    return Device(name, "gpu", kind, memory, int(memory * JAX_GPU_FRACTION), "estimated")


DEVICES: Dict[str, Device] = {d.name: d for d in (
    _tpu("v2", "TPU v2", 16),
    _tpu("v3", "TPU v3", 32),
    # what XLA:TPU's compiler reports as usable HBM ("XLA::TPU program HBM
    # usage: ... / 15.75G", "Used ... of 15.75G hbm"; libtpu 0.0.50, printed
    # to 0.01G)
    _tpu("v4", "TPU v4", 32, reported_gib=15.25),
    _tpu("v5e", "TPU v5 lite", 16, reported_gib=15.75),
    _tpu("v5p", "TPU v5", 96, reported_gib=95.73),
    _tpu("v6e", "TPU v6 lite", 32, reported_gib=31.24),
    _tpu("v7x", "TPU7x", 192),
    _gpu("t4", "Tesla T4", 16 * GB),
    _gpu("v100", "Tesla V100-SXM2-32GB", 32 * GB),
    _gpu("a10g", "NVIDIA A10G", 24 * GB),
    _gpu("l4", "NVIDIA L4", 24 * GB),
    _gpu("a100-40g", "NVIDIA A100-SXM4-40GB", 40 * GiB),
    _gpu("a100", "NVIDIA A100-SXM4-80GB", 80 * GiB),
    _gpu("h100", "NVIDIA H100 80GB HBM3", 80 * GiB),
    # an H200 with jax's defaults reported bytes_limit 112583507968
    _gpu("h200", "NVIDIA H200", 141 * GB, measured=112583507968),
    _gpu("b200", "NVIDIA B200", 180 * GB),
    _gpu("rtx4090", "NVIDIA GeForce RTX 4090", 24 * GiB),
)}

#: other names of the TPU generations (JAX's device_kind, marketing names)
TPU_ALIASES = {
    "tpu v2": "v2", "tpu v3": "v3", "tpu v4": "v4",
    "tpu v5 lite": "v5e", "tpu v5e": "v5e", "v5lite": "v5e", "v5litepod": "v5e",
    "tpu v5": "v5p", "tpu v5p": "v5p",
    "tpu v6 lite": "v6e", "tpu v6e": "v6e", "trillium": "v6e",
    "tpu7x": "v7x", "tpu v7x": "v7x", "tpu7": "v7x", "ironwood": "v7x",
}

#: the TPU generations of the table, oldest first
TPU_GENERATIONS = tuple(name for name, d in DEVICES.items() if d.platform == "tpu")


def tpu_generation(name) -> Optional[str]:
    """The TPU generation ``name`` stands for (``v4``, ``v5e``, ...): its short
    name in any case, a topology (``v5e:2x2``), jax's ``device_kind`` (``TPU v5
    lite``) or another name people use (``trillium``); ``None`` when it names
    no TPU generation. The one reader of TPU names: the size model, the
    TPU layout model and :func:`lookup` all call it.

    >>> tpu_generation("v6e:2x2"), tpu_generation("TPU v5 lite"), tpu_generation("h100")
    ('v6e', 'v5e', None)
    """
    key = " ".join(str(name).strip().lower().split())
    key = key.split(":", 1)[0].strip()
    if key in TPU_ALIASES:
        return TPU_ALIASES[key]
    if key.startswith("tpu"):
        key = key[3:].strip()
    if key in TPU_ALIASES:
        return TPU_ALIASES[key]
    d = DEVICES.get(key)
    return key if d is not None and d.platform == "tpu" else None


_GPU_ALIASES = {"a100-80g": "a100", "a100-80gb": "a100", "a100-40gb": "a100-40g",
                "h100-80g": "h100", "h100-sxm": "h100", "h200-141g": "h200"}


def lookup(name: str) -> Device:
    """The :class:`Device` called ``name`` (see the module docstring for the
    names accepted). Raises :class:`~xlashape.ShapeValueError` naming the
    known devices for any other name."""
    key = str(name).strip().lower()
    if key in DEVICES:
        return DEVICES[key]
    tpu = tpu_generation(key)
    if tpu is not None:
        return DEVICES[tpu]
    short = key.split(":")[0]
    if short in DEVICES:
        return DEVICES[short]
    if short in _GPU_ALIASES:
        return DEVICES[_GPU_ALIASES[short]]
    for d in DEVICES.values():
        if d.kind.lower() == key:
            return d
    stripped = key.replace("nvidia", "").replace("tesla", "").strip()
    for d in DEVICES.values():
        if d.platform == "gpu" and stripped.split()[:1] == [d.name.split("-")[0]]:
            return d
    raise ShapeValueError(f"unknown device {name!r}: expected one of {', '.join(DEVICES)} "
                          "(or jax's device_kind, e.g. 'TPU v5 lite', 'NVIDIA H100 80GB HBM3'), "
                          "or give the memory with --limit")


def usable_bytes(device: Device, fraction: Optional[float] = None) -> int:
    """What one program may use on ``device``; on a GPU, ``fraction`` replaces
    jax's default share (``XLA_PYTHON_CLIENT_MEM_FRACTION``)."""
    if fraction is None or device.platform != "gpu":
        return device.usable_bytes
    if not 0 < fraction <= 1:
        raise ShapeValueError(f"memory fraction {fraction} is not in (0, 1]")
    return int(device.memory_bytes * fraction)
