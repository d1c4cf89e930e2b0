"""The hand-written type stubs (``xlashape/*.pyi``) match the compiled modules.

What ``mypy.stubtest`` checks first, without mypy: every public class and
function the module defines is in the stub and every one in the stub exists;
every member a stub class declares exists on the class, with the right kind
(property, staticmethod, method, attribute); every public member the class
defines is declared; and the parameters of every stubbed function and
non-dunder method (names, kinds, which have defaults) are the ones
``inspect.signature`` reports for the compiled object. Runs against the
installed package (the stubs ship with it).
"""

import ast
import importlib
import inspect
import pathlib
import sys

import pytest

import xlashape

PKG = pathlib.Path(xlashape.__file__).resolve().parent
STUBS = sorted(PKG.glob("*.pyi"))


def test_the_compiled_modules_have_stubs():
    assert {p.stem for p in STUBS} >= {"_core", "_textscan"}


def _stub_params(fn: ast.FunctionDef, method: bool):
    a = fn.args
    positional = a.posonlyargs + a.args
    if method and not _has_decorator(fn, "staticmethod"):
        positional = positional[1:]
    out = []
    n_defaults = len(a.defaults)
    for i, arg in enumerate(positional):
        out.append((arg.arg, "positional", i >= len(positional) - n_defaults))
    if a.vararg:
        out.append((a.vararg.arg, "*", False))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        out.append((arg.arg, "keyword", default is not None))
    if a.kwarg:
        out.append((a.kwarg.arg, "**", False))
    return out


def _runtime_params(obj, method: bool):
    sig = inspect.signature(obj)
    params = list(sig.parameters.values())
    if method and params and params[0].name == "self":
        params = params[1:]
    kinds = {
        inspect.Parameter.POSITIONAL_ONLY: "positional",
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
        inspect.Parameter.VAR_POSITIONAL: "*",
        inspect.Parameter.KEYWORD_ONLY: "keyword",
        inspect.Parameter.VAR_KEYWORD: "**",
    }
    return [(p.name, kinds[p.kind], p.default is not inspect.Parameter.empty) for p in params]


def _has_decorator(fn, name):
    return any(isinstance(d, ast.Name) and d.id == name for d in fn.decorator_list)


def _defined_here(module, value):
    return getattr(value, "__module__", None) == module.__name__


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.name)
def test_stub_matches_module(stub):
    module = importlib.import_module(f"xlashape.{stub.stem}")
    tree = ast.parse(stub.read_text())
    problems = []
    stub_names = set()
    for node in _body(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            stub_names.add(node.name)
            if not hasattr(module, node.name):
                problems.append(f"{node.name}: in the stub, not in the module")
                continue
            runtime = getattr(module, node.name)
            if isinstance(node, ast.FunctionDef):
                if _stub_params(node, False) != _runtime_params(runtime, False):
                    problems.append(f"{node.name}: stub {_stub_params(node, False)}, "
                                    f"module {_runtime_params(runtime, False)}")
            else:
                problems += _check_class(node, runtime)
    public = {name for name, value in vars(module).items() if not name.startswith("_")
              and (inspect.isclass(value) or callable(value)) and _defined_here(module, value)}
    for name in sorted(public - stub_names):
        problems.append(f"{name}: in the module, not in the stub")
    assert problems == []


def _body(statements):
    """The statements, with ``if sys.version_info ...:`` blocks resolved for
    this Python."""
    for item in statements:
        if isinstance(item, ast.If):
            test = compile(ast.Expression(item.test), "<stub>", "eval")
            yield from _body(item.body if eval(test, {"sys": sys}) else item.orelse)
        else:
            yield item


def _check_class(node: ast.ClassDef, cls):
    problems = []
    declared = set()
    for item in _body(node.body):
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            name = item.target.id
            declared.add(name)
            if name == "__hash__":  # "__hash__: None": unhashable
                if cls.__hash__ is not None:
                    problems.append(f"{cls.__name__}.__hash__: None in the stub, set at runtime")
            elif not hasattr(cls, name):
                problems.append(f"{cls.__name__}.{name}: declared, missing")
        elif isinstance(item, ast.FunctionDef):
            name = item.name
            declared.add(name)
            if not hasattr(cls, name):
                problems.append(f"{cls.__name__}.{name}: declared, missing")
                continue
            static = inspect.getattr_static(cls, name)
            if _has_decorator(item, "property"):
                if not (isinstance(static, property) or inspect.isgetsetdescriptor(static)
                        or inspect.ismemberdescriptor(static)):
                    problems.append(f"{cls.__name__}.{name}: a property in the stub, "
                                    f"{type(static).__name__} at runtime")
                continue
            if _has_decorator(item, "staticmethod") != isinstance(static, staticmethod):
                problems.append(f"{cls.__name__}.{name}: staticmethod in one, not the other")
            if not callable(getattr(cls, name)):
                problems.append(f"{cls.__name__}.{name}: a method in the stub, not callable")
                continue
            if name.startswith("__") or name == "__init__":
                continue  # slot wrappers report generic signatures
            try:
                runtime = _runtime_params(getattr(cls, name), True)
            except (TypeError, ValueError):
                continue
            if _stub_params(item, True) != runtime:
                problems.append(f"{cls.__name__}.{name}: stub {_stub_params(item, True)}, "
                                f"runtime {runtime}")
    for name in sorted(vars(cls)):
        if not name.startswith("_") and name not in declared:
            problems.append(f"{cls.__name__}.{name}: at runtime, not in the stub")
    return problems
