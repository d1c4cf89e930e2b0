"""xlashape: XLA array shapes and memory layouts, in Python.

>>> import xlashape
>>> s = xlashape.parse_shape("bf16[8,1280,1,16384]{3,2,1,0:T(8,128)(2,1)}")
>>> xlashape.shape_util.byte_size_of(s)      # 8*1280*1*16384 elements * 2 bytes
335544320
>>> xlashape.tiling.physical_size_in_bytes(s) // xlashape.shape_util.byte_size_of(s)
8

The public names (``__all__``) are defined in ``xlashape._api`` and imported
together the first time any of them is used: ``import xlashape`` itself
costs next to nothing, and the ``xlashape`` command imports only what its
subcommand needs (``xlashape --version`` does not import numpy).
"""

import importlib as _importlib
import importlib.util as _importlib_util
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if _importlib_util.find_spec(__name__ + "._core") is None:  # pragma: no cover
    raise ImportError(
        "xlashape's compiled core (xlashape._core) is not built. Install the "
        "package with `pip install .` (or `pip install -e .` in a checkout) so "
        "that the Cython extension is compiled; a C compiler and the Python "
        "headers are needed.")

if TYPE_CHECKING:  # what static tools see: every public name, as if imported here
    from ._api import *  # noqa: F401,F403
    from ._api import __all__ as __all__


def _load_api():
    api = _importlib.import_module("._api", __name__)
    names = globals()
    for name in api.__all__:
        names.setdefault(name, getattr(api, name))
    names["__all__"] = list(api.__all__)


def __getattr__(name):
    # PEP 562: asked only for names the module does not have (yet). A
    # submodule is imported alone (``from . import x`` inside the package
    # asks here first); any other name loads the public names.
    if name.startswith("__") and name != "__all__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name.isidentifier() and _importlib_util.find_spec(f"{__name__}.{name}") is not None:
        return _importlib.import_module(f".{name}", __name__)
    if "__all__" not in globals():
        _load_api()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    if "__all__" not in globals():
        _load_api()
    return sorted(globals())
