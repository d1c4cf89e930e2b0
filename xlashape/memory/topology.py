"""A TPU without a TPU: lower a function for a TPU topology on any host.

XLA:TPU compiles without a TPU when jax is given a *topology*
(``jax.experimental.topologies.get_topology_desc``): its devices are
descriptions, enough for jit to lower and compile a program for them but
not to run it. :func:`lower_for_tpu` places the function's arguments
(arrays or ``jax.ShapeDtypeStruct``: only their shapes and dtypes matter) on
the first device of the topology and lowers it; :func:`xlashape.memory.analyze`
then compiles the lowered function with XLA:TPU and gives the whole analysis
-- XLA:TPU's figures, its layouts and their padding, the peak and what is
live at it -- and, with ``device=``, the verdict::

    lowered = xlashape.memory.lower_for_tpu(f, x, w, topology="v5e:2x2")
    print(xlashape.memory.analyze(lowered, device="v5e"))

For a sharded program, build the arguments' shardings on the topology's
devices yourself (``tpu_topology(name).devices``, a ``jax.sharding.Mesh`` of
them) and pass ``jax.ShapeDtypeStruct`` arguments carrying them: they are
kept as given.

XLA:TPU's compiler is in the ``libtpu`` package, which jax pairs with each
of its versions (``pip install "jax[tpu]==<your jax version>"`` installs the
one that goes with yours: libtpu 0.0.42.* for jax 0.10.2, 0.0.50.* for jax
0.12.0.1, both tested). Without it, :class:`~xlashape.errors.MissingDependencyError`
says so. On a host without a TPU, libtpu prints warnings about TPU worker
host names when it loads: they are harmless; ``JAX_PLATFORMS=cpu`` keeps jax
from also trying to run on a TPU.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from typing import Dict

from ..errors import MissingDependencyError, ShapeTypeError, ShapeValueError

__all__ = ["tpu_topology", "lower_for_tpu", "libtpu_requirement"]

_TOPOLOGIES: Dict[str, object] = {}


def _jax():
    try:
        import jax  # an optional dependency: this feature needs it, the package does not
    except ImportError:
        raise MissingDependencyError(
            "lowering for a TPU topology needs jax: pip install 'jax[tpu]' "
            "(jax, and XLA:TPU's compiler in the libtpu package)") from None
    return jax


def libtpu_requirement() -> str:
    """The libtpu the installed jax pairs with (its ``tpu`` extra's pin, e.g.
    ``libtpu==0.0.42.*`` for jax 0.10.2), or ``libtpu`` when jax does not say."""
    try:
        for req in importlib.metadata.requires("jax") or ():
            if req.startswith("libtpu") and 'extra == "tpu"' in req:
                return req.split(";", 1)[0].strip()
    except importlib.metadata.PackageNotFoundError:
        pass
    return "libtpu"


def _has_libtpu() -> bool:
    return (importlib.util.find_spec("libtpu") is not None
            or bool(os.environ.get("TPU_LIBRARY_PATH")))


def tpu_topology(name: str = "v5e:2x2"):
    """jax's description of the TPU topology ``name`` (``v5e:2x2``,
    ``v6e:2x2``, ``v5p:2x2x1``, ``v4:2x2x1``...): its ``devices`` take
    shardings as real TPU devices do, for compiling only. Remembered per name.

    Raises :class:`~xlashape.errors.MissingDependencyError` without jax or
    libtpu, :class:`~xlashape.ShapeValueError` for a topology XLA:TPU does
    not know."""
    if not isinstance(name, str):
        raise ShapeTypeError(f"topology: expected a name such as 'v5e:2x2', not "
                             f"{type(name).__name__}")
    got = _TOPOLOGIES.get(name)
    if got is not None:
        return got
    jax = _jax()
    from jax.experimental import topologies  # with jax, above

    try:
        got = topologies.get_topology_desc(topology_name=name, platform="tpu")
    except Exception as e:  # noqa: BLE001 - jax raises RuntimeError or its own errors
        if not _has_libtpu():
            raise MissingDependencyError(
                f"compiling for the TPU topology {name!r} needs XLA:TPU's compiler, which is in "
                f"the libtpu package (not installed): pip install 'jax[tpu]=={jax.__version__}' "
                f"(or pip install '{libtpu_requirement()}', the libtpu jax "
                f"{jax.__version__} pairs with); no TPU is needed") from None
        raise ShapeValueError(f"XLA:TPU could not make the topology {name!r}: {e}") from None
    _TOPOLOGIES[name] = got
    return got


def lower_for_tpu(fun, *args, topology: str = "v5e:2x2", **kwargs):
    """``fun`` lowered for the TPU topology ``topology``, its arguments
    (arrays, ``jax.ShapeDtypeStruct``, or pytrees of them) placed on the
    topology's first device: a ``jax.stages.Lowered`` for
    :func:`xlashape.memory.analyze` (which compiles it with XLA:TPU).

    ``fun`` is a function or a jitted one (``jax.jit(f, donate_argnums=0,
    static_argnums=...)``: give jit's options there); ``kwargs`` are its
    keyword arguments. An argument that is a ``jax.ShapeDtypeStruct``
    already sharded over TPU devices (the topology's) is kept as given;
    anything without a shape (a static argument) is passed as is."""
    jax = _jax()
    topo = tpu_topology(topology)
    single = jax.sharding.SingleDeviceSharding(topo.devices[0])

    def place(x):
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            return x
        sharding = getattr(x, "sharding", None) if isinstance(x, jax.ShapeDtypeStruct) else None
        if sharding is not None:
            try:
                on_tpu = all(getattr(d, "platform", "") == "tpu" for d in sharding.device_set)
            except Exception:  # noqa: BLE001 - an abstract sharding: place it
                on_tpu = False
            if on_tpu:
                return x
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=single)

    jitted = fun if callable(getattr(fun, "lower", None)) else jax.jit(fun)
    return jitted.lower(*jax.tree.map(place, args), **jax.tree.map(place, kwargs))
