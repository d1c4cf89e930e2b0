"""Build the compiled parts. Set XLASHAPE_DEBUG=1 for bounds checks and -O0 -g.

Six Cython extensions, built in parallel (one job per CPU unless
``build_ext -j N`` says otherwise): ``_core`` (offset programs, LayoutArray
and its bulk kernels, with the hand-written C of ``xlashape/_kernels.c``)
at -O3, and at -O2 the two text scanners ``_hloscan`` and ``_textscan``,
``cli/_hlo_json`` (the rows of ``xlashape hlo --json``, fed by ``_hloscan``)
and the two protobuf wire-format walkers ``_protowire`` (the parse estimate
of gzip input) and ``_protoscan`` (an ``.hlo.pb``'s instructions).
Without debug information (-g0) unless XLASHAPE_DEBUG is set: it is most of
what compiling Cython's output costs beyond the optimizer, and a release
build has no use for it. benchmarks/README.md ("Build time") has the
measurements.
"""

import os

import numpy as np
import setuptools
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext as _build_ext

DEBUG = os.environ.get("XLASHAPE_DEBUG", "") not in ("", "0")

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "cdivision": True,
    "embedsignature": True,
    "initializedcheck": DEBUG,
}

if DEBUG:
    CORE_FLAGS = SCAN_FLAGS = ["-O0", "-g", "-UNDEBUG"]
else:
    CORE_FLAGS = ["-O3", "-g0"]      # the bulk kernels and scalar paths
    SCAN_FLAGS = ["-O2", "-g0"]      # byte scanners: branches and calls, nothing to vectorize

# Hand-written C compiled into an extension beside Cython's output, with
# warnings on (Cython's own output is not warning-clean, so these flags
# cannot go on the whole extension).
HAND_WRITTEN_C = {"xlashape._core": ["xlashape/_kernels.c"]}
HAND_WRITTEN_FLAGS = ["-Wall", "-Wextra"]

extensions = [
    Extension(
        "xlashape._core",
        ["xlashape/_core.pyx"],
        include_dirs=[np.get_include(), "xlashape"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=CORE_FLAGS,
        depends=["xlashape/_kernels.h", "xlashape/_kernels.c"],
    ),
    # the HLO reader's fast lane (plain C string scanning, no numpy)
    Extension(
        "xlashape._hloscan",
        ["xlashape/_hloscan.pyx"],
        extra_compile_args=SCAN_FLAGS,
        depends=["xlashape/_hloscan.pxd", "xlashape/_ascii.pxd"],
    ),
    # the rows of `xlashape hlo --json`, written in C from the scanner's spans
    Extension(
        "xlashape.cli._hlo_json",
        ["xlashape/cli/_hlo_json.pyx"],
        extra_compile_args=SCAN_FLAGS,
        depends=["xlashape/_hloscan.pxd", "xlashape/_ascii.pxd"],
    ),
    # The HLO parser's compiled fast path (no numpy).
    Extension(
        "xlashape._textscan",
        ["xlashape/_textscan.pyx"],
        extra_compile_args=SCAN_FLAGS,
    ),
    # protos' wire-format walks (the parse estimate of gzip input)
    Extension(
        "xlashape._protowire",
        ["xlashape/_protowire.pyx"],
        extra_compile_args=SCAN_FLAGS,
        depends=["xlashape/_protowire.pxd"],
    ),
    # hlo_proto's fast path: an HloModuleProto's instructions from its bytes
    Extension(
        "xlashape._protoscan",
        ["xlashape/_protoscan.pyx"],
        extra_compile_args=SCAN_FLAGS,
        depends=["xlashape/_protowire.pxd", "xlashape/_hloscan.pxd"],
    ),
]


class build_ext(_build_ext):
    """setuptools' build_ext, parallel by default, compiling HAND_WRITTEN_C."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = True          # distutils: one job per CPU

    def build_extension(self, ext):
        own = HAND_WRITTEN_C.get(ext.name, [])
        if own and self._stale(ext):
            objects = self.compiler.compile(
                own, output_dir=self.build_temp, macros=ext.define_macros,
                include_dirs=ext.include_dirs, debug=self.debug,
                extra_postargs=HAND_WRITTEN_FLAGS + ext.extra_compile_args,
                depends=ext.depends)
            ext.extra_objects = [o for o in ext.extra_objects if o not in objects] + objects
        super().build_extension(ext)

    def _stale(self, ext):
        # as distutils decides whether to rebuild an extension
        target = self.get_ext_fullpath(ext.name)
        if self.force or not os.path.exists(target):
            return True
        built = os.path.getmtime(target)
        return any(os.path.getmtime(p) > built for p in list(ext.sources) + list(ext.depends))


# PEP 639's license expression where setuptools knows it (77+), else the
# older License field (see pyproject.toml's "dynamic").
_SETUPTOOLS = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
LICENSE = ({"license_expression": "Apache-2.0"} if _SETUPTOOLS >= (77, 0)
           else {"license": "Apache-2.0"})

setup(ext_modules=cythonize(extensions, compiler_directives=directives,
                            include_path=["xlashape"], nthreads=os.cpu_count() or 1),
      cmdclass={"build_ext": build_ext},
      **LICENSE)
