"""The README's Architecture section is true.

Its code block lists the package's modules in layers, top to bottom; a
module may import only from its own layer and the layers below. This test
reads that block, finds every module of the package (Python modules, the
``cli`` package with its ``.pyx``, the modules of the ``memory`` and
``reporters`` packages by their path, ``memory/account``, with
``memory/__init__`` standing for the package; Cython ``.pyx`` modules; a
``.pxd`` belongs to the ``.pyx`` of its name, ``.pxi`` files to ``_core``, and
``_ascii.pxd``, declarations alone, is a module of its own), and checks each
import in each of them, function-level imports included: Python files with
``ast``, Cython files line by line.

Then the rules of the memory accounting (one model, views that only read
it): a view (``reporters/``) imports no reader and no source and opens no
file; a reader imports nothing of ``memory/`` or ``reporters/``.

Adding a module means adding it to the README's block, on the line of the
layer it belongs to.
"""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "xlashape"
#: subpackages whose modules are listed one by one (``memory/account``)
SUBPACKAGES = ("memory", "reporters")

if not (PKG / "__init__.py").exists() or not (ROOT / "README.md").exists():  # pragma: no cover
    pytest.skip("not run from a checkout", allow_module_level=True)


def readme_layers():
    """[{module, ...}, ...] from the README's block, top layer first."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Architecture", 1)[1]
    block = section.split("```", 2)[1]
    layers = []
    for line in block.splitlines():
        if not line.strip():
            continue
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        layer = set()
        for name in names.split(","):
            name = name.strip().removeprefix("xlashape/").rstrip("/")
            name = re.sub(r"\.(py|pyx|pxd)$", "", name)
            layer.add(name.removesuffix("/__init__"))
        layers.append(layer)
    return layers


def module_of(path: pathlib.Path) -> str:
    if path.parent.name == "cli":
        return "cli"
    if path.parent.name in SUBPACKAGES:
        return path.parent.name if path.stem == "__init__" else f"{path.parent.name}/{path.stem}"
    if path.suffix == ".pxi" or (path.suffix == ".pxd" and path.stem == "_core"):
        return "_core"
    return path.stem


def package_files():
    files = [p for p in PKG.iterdir() if p.suffix in (".py", ".pyx", ".pxi", ".pxd")]
    cli = PKG / "cli"
    files += sorted(p for p in cli.iterdir() if p.suffix in (".py", ".pyx"))
    for sub in SUBPACKAGES:
        files += sorted((PKG / sub).glob("*.py"))
    return files


def _resolve(parts):
    """The module a dotted path inside the package names (``["memory",
    "model"]`` -> ``memory/model``; ``["memory"]`` -> ``memory``)."""
    if not parts:
        return None
    head = parts[0]
    if head == "cli":
        return "cli"
    if head in SUBPACKAGES:
        if len(parts) > 1 and (PKG / head / f"{parts[1]}.py").exists():
            return f"{head}/{parts[1]}"
        return head
    return head


def _names_of(base, names):
    # "from <base> import a, b": the names that are modules (of the package,
    # or of the subpackage base names)
    out = set()
    for n in names:
        where = PKG.joinpath(*base) if base else PKG
        if (where / f"{n}.py").exists() or (where / f"{n}.pyx").exists() or \
                (where / f"{n}.pxd").exists() or (where / n).is_dir():
            out.add(_resolve(list(base) + [n]))
    return out


def python_imports(path: pathlib.Path):
    """(line, imported module of the package) for every import in a .py file."""
    pkg = [] if path.parent == PKG else [path.parent.name]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("xlashape."):
                    out.append((node.lineno, _resolve(alias.name.split(".")[1:])))
        elif isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if node.level == 0:
                if node.module == "xlashape":
                    out += [(node.lineno, m) for m in _names_of([], names)]
                elif (node.module or "").startswith("xlashape."):
                    out.append((node.lineno, _resolve(node.module.split(".")[1:])))
                continue
            if node.level - 1 > len(pkg):  # pragma: no cover - would leave the package
                raise AssertionError(f"{path}: relative import above the package")
            base = pkg[:len(pkg) - (node.level - 1)]
            if base == ["cli"] and pkg == ["cli"]:
                continue  # inside cli: its own modules
            if node.module:
                out.append((node.lineno, _resolve(base + node.module.split("."))))
            else:
                out += [(node.lineno, m) for m in _names_of(base, names)]
    return [(n, m) for n, m in out if m is not None]


_CYTHON_IMPORT = re.compile(
    r"^\s*(?:from\s+(\.+|xlashape\.)([\w.]*)\s+c?import\s+([\w, ()]+)|c?import\s+xlashape\.(\w+))")


def cython_imports(path: pathlib.Path):
    in_cli = path.parent.name == "cli"
    out = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        m = _CYTHON_IMPORT.match(line)
        if not m:
            continue
        if m.group(4):
            out.append((lineno, m.group(4)))
            continue
        if in_cli and m.group(1) == ".":
            continue  # inside cli: its own modules
        module = m.group(2).split(".")[0]
        names = [n.strip().split(" ")[0] for n in m.group(3).strip("() ").split(",")]
        if module:
            out.append((lineno, _resolve([module])))
        else:
            out += [(lineno, x) for x in _names_of([], names)]
    return out


def test_every_module_is_in_exactly_one_layer():
    layers = readme_layers()
    listed = [m for layer in layers for m in layer]
    assert len(listed) == len(set(listed)), "a module is listed twice in the README"
    found = {module_of(p) for p in package_files()}
    assert found - set(listed) == set(), "modules missing from the README's Architecture block"
    assert set(listed) - found == set(), "the README lists modules that do not exist"


def test_imports_follow_the_layers():
    layers = readme_layers()
    rank = {m: len(layers) - i for i, layer in enumerate(layers) for m in layer}
    bad = []
    for path in package_files():
        source = module_of(path)
        imports = python_imports(path) if path.suffix == ".py" else cython_imports(path)
        for lineno, target in imports:
            if target != source and rank[target] > rank[source]:
                bad.append(f"{path.relative_to(ROOT)}:{lineno}: {source} imports {target}, "
                           "a higher layer")
    assert bad == []


def test_the_checker_sees_imports():
    # The parsing above really finds imports (else the layer test would pass
    # vacuously): known edges of the package.
    edges = {(module_of(p), t) for p in package_files()
             for _, t in (python_imports(p) if p.suffix == ".py" else cython_imports(p))}
    for edge in [("hlo_text", "_validation"), ("shape_util", "_validation"),
                 ("layout_util", "_validation"), ("index_maps", "_core"), ("_core", "tiling"),
                 ("hlo_text", "_textscan"), ("cli", "tiling"), ("layout", "shape"),
                 ("_core", "errors"), ("cli", "_hloscan"), ("_hloscan", "_ascii"),
                 ("cli", "_ascii"), ("protos", "_protowire"), ("hlo_proto", "_protoscan"),
                 ("_protoscan", "_protowire"), ("_protoscan", "_hloscan")]:
        assert edge in edges, edge
    assert not any(source == "tiling" and target == "_core" for source, target in edges)


# Import cycles allowed inside one layer, each with its reason. Any other
# cycle (a group of modules that import each other, directly or through
# others, function-level imports included) fails the test below.
ALLOWED_CYCLES = {
    # LayoutArray's numpy protocols call the core and the core hands numpy's
    # calls to them; _numpy_api's fancy indexing uses the compiled index maps
    frozenset({"_core", "_numpy_api", "index_maps"}),
    # Layout checks that a physical_shape argument is a Shape, and the
    # to_proto()/from_proto() methods of Shape, Layout, Tile and SplitConfig
    # call the ShapeProto codec, which builds those classes (function-level
    # imports in layout.py and shape.py)
    frozenset({"layout", "shape", "shape_proto"}),
}


def import_graph():
    graph = {}
    for p in package_files():
        source = module_of(p)
        imports = python_imports(p) if p.suffix == ".py" else cython_imports(p)
        graph.setdefault(source, set()).update(t for _, t in imports if t != source)
    return graph


def import_cycles(graph):
    """The groups of two or more modules that all reach each other."""
    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for t in graph.get(todo.pop(), ()):
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return seen

    reached = {m: reach(m) for m in graph}
    groups = {frozenset({m} | {t for t in reached[m] if m in reached.get(t, ())})
              for m in graph}
    return {g for g in groups if len(g) > 1}


def test_no_import_cycle_but_the_allowed_ones():
    cycles = import_cycles(import_graph())
    assert cycles - ALLOWED_CYCLES == set(), "a new import cycle"


def test_every_allowed_cycle_is_still_one():
    # the list says what the package does: a cycle that is gone leaves it
    assert ALLOWED_CYCLES - import_cycles(import_graph()) == set()


def test_the_cycle_finder_finds_cycles():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {
        frozenset("abc")}
    assert import_cycles({"a": {"b"}, "b": set()}) == set()


def test_the_readme_names_the_allowed_cycles():
    text = (ROOT / "README.md").read_text().split("## Architecture", 1)[1]
    rule = text.split("**No import cycles", 1)[1].split("\n* ", 1)[0]
    for cycle in ALLOWED_CYCLES:
        named = "/".join(f"`{m}`" for m in sorted(cycle, key=rule.find))
        assert named in " ".join(rule.split()), named


# -- the memory accounting: one model, views that only read it ---------------------

#: the modules that read XLA's artifacts (files, bytes, text)
READERS = {"hlo_module", "hlo_reader", "hlo_model", "hlo_blocks", "hlo_calls", "hlo_syntax",
           "hlo_warnings", "_files", "_hloscan", "xla_dump", "live_range", "oom_report",
           "hlo_proto", "protos"}
#: what turns an input into the model: a view may use none of it
BUILDERS = READERS | {"memory/analyze", "memory/account", "memory/records", "memory/peak",
                      "memory/source_dump", "memory/source_proto", "memory/source_hlo",
                      "memory/source_oom", "memory/source_jax", "memory/partitions"}
#: calls that open or look for a file
_FILE_CALLS = re.compile(r"\b(open|open_text|os\.path\.(isfile|exists|isdir|getsize)|os\.stat|"
                         r"os\.listdir|os\.scandir|os\.walk|glob|read_text|read_bytes)\s*\(")


def _imports_of(prefix):
    return {(p, t) for p in package_files() if module_of(p).startswith(prefix)
            for _, t in (python_imports(p) if p.suffix == ".py" else cython_imports(p))}


def test_views_import_no_reader_and_no_builder():
    bad = sorted(f"{p.relative_to(ROOT)} imports {t}" for p, t in _imports_of("reporters")
                 if t in BUILDERS)
    assert bad == []


def test_views_open_no_file():
    bad = []
    for p in package_files():
        if module_of(p).startswith("reporters"):
            for n, line in enumerate(p.read_text().splitlines(), 1):
                code = line.split("#", 1)[0]
                if _FILE_CALLS.search(code) and "def " not in code:
                    bad.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert bad == []


def test_readers_import_no_view_and_nothing_of_the_accounting():
    bad = sorted(f"{p.relative_to(ROOT)} imports {t}" for p in package_files()
                 if module_of(p) in READERS
                 for _, t in (python_imports(p) if p.suffix == ".py" else cython_imports(p))
                 if t.startswith(("memory", "reporters")))
    assert bad == []


def test_the_hlo_reader_reads_hlo_only():
    # one reader per format: the HLO text reader's modules know nothing of
    # out-of-memory reports (oom_report reads those; the commands choose)
    hlo = {"hlo_reader", "hlo_model", "hlo_blocks", "hlo_calls", "hlo_syntax", "hlo_warnings",
           "_files", "_hloscan"}
    edges = {(module_of(p), t) for p in package_files() if module_of(p) in hlo
             for _, t in (python_imports(p) if p.suffix == ".py" else cython_imports(p))}
    assert ("hlo_reader", "hlo_model") in edges and ("oom_report", "hlo_warnings") in {
        (module_of(p), t) for p in package_files() if module_of(p) == "oom_report"
        for _, t in python_imports(p)}
    assert sorted(e for e in edges if e[1] == "oom_report") == []


def test_the_view_rules_see_what_they_look_for():
    # the rules above would pass vacuously if the parsing missed the imports
    edges = _imports_of("reporters")
    assert any(t == "memory/model" for _, t in edges)
    edges = {(module_of(p), t) for p, t in _imports_of("memory")}
    for edge in [("memory/account", "memory/peak"), ("memory/source_dump", "xla_dump"),
                 ("memory/analyze", "memory/source_proto"), ("memory", "memory/analyze"),
                 ("memory/account", "sizes"), ("memory/source_proto", "protos")]:
        assert edge in edges, edge
    assert _FILE_CALLS.search("with open(path) as f:") and not _FILE_CALLS.search("reopen_x")
