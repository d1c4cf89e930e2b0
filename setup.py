"""Build the Cython core. Set XLASHAPE_DEBUG=1 for bounds checks and -O0 -g."""

import os

import numpy as np
import setuptools
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("XLASHAPE_DEBUG", "") not in ("", "0")

directives = {
    "language_level": 3,
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "cdivision": True,
    "embedsignature": True,
    "initializedcheck": DEBUG,
}

extra_compile_args = ["-O0", "-g", "-UNDEBUG"] if DEBUG else ["-O3"]

extensions = [
    Extension(
        "xlashape._core",
        ["xlashape/_core.pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=extra_compile_args,
    ),
    # the HLO reader's fast lane (plain C string scanning, no numpy)
    Extension(
        "xlashape._hloscan",
        ["xlashape/_hloscan.pyx"],
        extra_compile_args=extra_compile_args,
    ),
    # The HLO parser's compiled fast path (no numpy).
    Extension(
        "xlashape._textscan",
        ["xlashape/_textscan.pyx"],
        extra_compile_args=extra_compile_args,
    ),
]

# PEP 639's license expression where setuptools knows it (77+), else the
# older License field (see pyproject.toml's "dynamic").
_SETUPTOOLS = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
LICENSE = ({"license_expression": "Apache-2.0"} if _SETUPTOOLS >= (77, 0)
           else {"license": "Apache-2.0"})

setup(ext_modules=cythonize(extensions, compiler_directives=directives,
                            include_path=["xlashape"]),
      **LICENSE)
