"""Read what ``XLA_FLAGS=--xla_dump_to=DIR`` writes: the modules of a dump
directory, their buffer assignments and memory-usage reports.

For every compiled module XLA writes, next to the module text
(``module_0004.jit_f.cl_123.after_optimizations.txt`` on TPU,
``module_0004.jit_f.cpu_after_optimizations.txt`` on CPU):

- ``...after_optimizations-buffer-assignment.txt``: every allocation of device
  memory (its size, memory space colour, what kind it is: entry parameter,
  output, temporary, thread-local, constant) and the values XLA placed in
  it, each with its offset, size and shape::

      allocation 3: size 20480, page 0, parameter 0, shape |bf16[8,1,1280]| at ShapeIndex {}, maybe-live-out:
       value: <26 fusion.20 @0> (size=20480,offset=0): bf16[8,1,1280]{2,0,1:T(8,128)(2,1)}

- ``...after_optimizations-memory-usage-report.txt``: per memory space
  ("Memory Space: vmem (color=1)") the total bytes and the allocations again.

Everything here streams: a buffer assignment is read one allocation at a
time (:func:`iter_buffer_assignment`), so a dump of any size is read in
constant memory. Lines that cannot be read are reported with their line
numbers, never fatal; so is a file of a dump directory that cannot be read
(a dangling or looping link, a FIFO, a device: :func:`find_dump_modules`
skips it with a :class:`DumpWarning`), while such a file given directly is
refused with :class:`~xlashape.UnreadableInputError`.

>>> text = '''BufferAssignment:
... allocation 0: size 2048, page 0, parameter 0, shape |f32[3,5]| at ShapeIndex {}:
...  value: <0 p.1 @0> (size=2048,offset=0): f32[3,5]{1,0:T(4,128)}
... '''
>>> (a,) = iter_buffer_assignment(text)
>>> a.kind, a.size, a.parameter_number, a.values[0].name, str(a.values[0].shape)
('parameter', 2048, 0, 'p.1', 'f32[3,5]{1,0:T(4,128)}')
"""

from __future__ import annotations

import errno
import os
import re
from bisect import bisect_left
from typing import Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple

from . import hlo_text
from .allocation_kinds import KINDS, kind_of
from .errors import HloParseError
from ._files import _not_regular, open_text, source_kind
from .hlo_warnings import HloWarning, _clip
from .shape import Shape

__all__ = [
    "BufferValue",
    "BufferAllocation",
    "MemorySpaceUsage",
    "DumpModule",
    "DumpWarning",
    "iter_buffer_assignment",
    "read_buffer_assignment",
    "read_memory_usage_report",
    "find_dump_modules",
    "platform_from_key",
    "ALLOCATION_KINDS",
    "HLO_PB_SUFFIXES",
    "MEMORY_REPORT_TXT",
]

#: Kinds of allocations (:mod:`xlashape.allocation_kinds`, the one vocabulary):
#: an entry ``parameter`` (also when an output reuses it), an ``output``
#: (``maybe-live-out``), a ``temporary`` (``preallocated-temp``: the block
#: holding the program's temporaries), ``thread-local`` (values of
#: computations run inside one instruction), ``constant``.
ALLOCATION_KINDS = KINDS

# (no lazy group before a final \s*$ in these: on a line that does not
# match, that backtracks quadratically over a long run of spaces; the rest of
# the line is stripped in Python instead)
_ALLOCATION = re.compile(r"\s*allocation\s+(\d{1,19}):\s*size\s+(-?\d{1,19})(.*)$")
_COLOR = re.compile(r"(?:^|,)\s*color\s+(\d{1,19})")
_PARAMETER = re.compile(r"(?:^|,)\s*parameter\s+(\d{1,19})(?:,\s*shape\s+\|(.*?)\|\s*at\s+ShapeIndex\s*"
                        r"\{([\d,\s]*)\})?")
_OUTPUT_SHAPE = re.compile(r"output shape is \|(.*?)\|")
# the value's name has no blank, ">" or brace (a lazy .+? tried every later
# ">" of a line that does not match, and runs of spaces around it backtracked)
_VALUE = re.compile(r"\s*value:\s*<(\d{1,19})\s+(%?[^\s>{}]+)(\{[\d,\s]*\})?(\s+\(phi\))?\s+@(\d{1,19})>\s*"
                    r"\(size=(-?\d{1,19}),\s*offset=(-?\d{1,19})\):\s*(.*)$")


class BufferValue(NamedTuple):
    """One value placed in an allocation: ``id`` (XLA's value number), the
    instruction ``name`` that defines it and the ``index`` into its shape
    (``()`` for the whole result), ``is_phi`` (a loop-carried merge), the
    memory space ``color``, its ``size`` and ``offset`` in bytes, its
    ``shape`` as XLA prints it (``shape_text``) and parsed (``shape``, ``None``
    if the text does not parse), the ``line`` it was read from, and its
    ``label`` as XLA prints it (``name`` plus ``{index}`` for a value of a
    tuple-shaped instruction: ``while.2{1}``, ``tuple{}``)."""

    id: int
    name: str
    index: Tuple[int, ...]
    is_phi: bool
    color: int
    size: int
    offset: int
    shape_text: str
    shape: Optional[Shape]
    line: int
    label: str


class BufferAllocation:
    """One allocation of a buffer assignment.

    ``index`` (XLA's allocation number), ``size`` in bytes, ``color`` (the
    memory space: 0 device memory, 1 VMEM on TPU, ...), ``kind`` (one of
    :data:`ALLOCATION_KINDS`, from the flags: :func:`xlashape.allocation_kinds.kind_of`),
    ``maybe_live_out`` (it may hold an output),
    ``parameter_number`` / ``parameter_index`` / ``parameter_shape`` for an
    entry parameter, ``output_shape`` when XLA names the output shape,
    ``flags`` (the raw text after the size), ``values`` (the
    :class:`BufferValue` objects in it) and ``line``.
    """

    __slots__ = ("index", "size", "color", "maybe_live_out", "parameter_number",
                 "parameter_index", "parameter_shape", "output_shape", "flags", "values",
                 "line", "is_thread_local", "is_constant", "is_preallocated_temp")

    def __init__(self, index: int, size: int, flags: str, line: int = 0):
        self.index = index
        self.size = size
        self.flags = flags
        self.line = line
        self.values: List[BufferValue] = []
        m = _COLOR.search(flags)
        self.color = int(m.group(1)) if m else 0
        m = _PARAMETER.search(flags)
        self.parameter_number = int(m.group(1)) if m else None
        self.parameter_shape = m.group(2) if m and m.group(2) is not None else None
        self.parameter_index = (tuple(int(x) for x in m.group(3).replace(" ", "").split(",") if x)
                                if m and m.group(3) is not None else ())
        m = _OUTPUT_SHAPE.search(flags)
        self.output_shape = m.group(1) if m else None
        words = {w.strip() for w in flags.split(",")}
        self.maybe_live_out = "maybe-live-out" in words
        self.is_thread_local = "thread-local" in words
        self.is_constant = "constant" in words
        self.is_preallocated_temp = "preallocated-temp" in words

    @classmethod
    def from_flags(cls, index: int, size: int, color: int, *, parameter_number=None,
                   parameter_index=(), parameter_shape=None, maybe_live_out=False,
                   is_thread_local=False, is_constant=False) -> "BufferAllocation":
        """An allocation from its flags already read (a ``BufferAssignmentProto``'s
        fields), without text to parse."""
        a = cls.__new__(cls)
        a.index, a.size, a.color, a.flags, a.line, a.values = index, size, color, "", 0, []
        a.parameter_number = parameter_number
        a.parameter_index = tuple(parameter_index)
        a.parameter_shape = parameter_shape
        a.output_shape = None
        a.maybe_live_out = maybe_live_out
        a.is_thread_local = is_thread_local
        a.is_constant = is_constant
        # BufferAllocation::IsPreallocatedTempBuffer
        a.is_preallocated_temp = not (parameter_number is not None or maybe_live_out
                                      or is_thread_local or is_constant)
        return a

    @property
    def kind(self) -> str:
        return kind_of(self)

    @property
    def is_entry_computation_parameter(self) -> bool:
        return self.parameter_number is not None

    def __repr__(self):
        return (f"<BufferAllocation {self.index}: {self.kind}, size {self.size}, "
                f"color {self.color}, {len(self.values)} values>")


def _allocation_rest(text: str) -> str:
    """What follows an allocation's size: its flags, without the blanks
    around them and one final ":"."""
    rest = text.strip()
    return rest[:-1] if rest.endswith(":") else rest


def _lines(source) -> Iterable[str]:
    if isinstance(source, str):
        return source.splitlines()
    return source


def iter_buffer_assignment(source, *, on_warning: Optional[Callable[[HloWarning], None]] = None
                           ) -> Iterator[BufferAllocation]:
    """Stream the allocations of a ``*-buffer-assignment.txt`` file:
    ``source`` is its text, a file object, or any iterable of lines. Each
    :class:`BufferAllocation` is yielded once its values have been read.
    Lines that are neither an allocation nor a value are passed to
    ``on_warning`` as :class:`~xlashape.hlo_module.HloWarning` (line number
    and reason) and skipped.
    """
    cache: Dict[str, Optional[Shape]] = {}
    current: Optional[BufferAllocation] = None
    lineno = 0
    for raw in _lines(source):
        lineno += 1
        line = raw.rstrip("\r\n")
        if line.startswith(" value:") or line.lstrip().startswith("value:"):
            m = _VALUE.match(line)
            if m is None or current is None:
                if on_warning is not None:
                    what = ("a value before any allocation" if m is not None
                            else "a value line that does not read as "
                                 "'value: <id name @color> (size=S,offset=O): shape'")
                    on_warning(HloWarning(lineno, f"{what}: {_clip(line)}"))
                continue
            text = m.group(8).rstrip()
            shape = cache.get(text, False)
            if shape is False:
                try:
                    shape = hlo_text.parse_shape(text)
                except HloParseError as e:
                    shape = None
                    if on_warning is not None:
                        on_warning(HloWarning(lineno, f"shape of value {m.group(2)} does not "
                                                      f"parse: {e.message}"))
                if len(cache) > 1 << 16:
                    cache.clear()
                cache[text] = shape
            idx = m.group(3)
            current.values.append(BufferValue(
                int(m.group(1)), m.group(2).lstrip("%"),
                tuple(int(x) for x in idx[1:-1].replace(" ", "").split(",") if x) if idx else (),
                m.group(4) is not None, int(m.group(5)), int(m.group(6)), int(m.group(7)),
                text, shape, lineno, m.group(2).lstrip("%") + (idx or "")))
            continue
        m = _ALLOCATION.match(line)
        if m is not None:
            if current is not None:
                yield current
            current = BufferAllocation(int(m.group(1)), int(m.group(2)),
                                       _allocation_rest(m.group(3)), lineno)
            continue
        s = line.strip()
        if not s or s == "BufferAssignment:":
            continue
        if on_warning is not None:
            on_warning(HloWarning(lineno, "not an allocation or value line of a buffer "
                                          "assignment: " + _clip(s)))
    if current is not None:
        yield current


def read_buffer_assignment(path, **kwargs) -> List[BufferAllocation]:
    """All allocations of a buffer-assignment file (a list; for big dumps
    prefer :func:`iter_buffer_assignment`, which streams). Anything but a
    regular file (a FIFO, a device, a directory) raises
    :class:`~xlashape.UnreadableInputError` naming it."""
    with open_text(path) as f:
        return list(iter_buffer_assignment(f, **kwargs))


class MemorySpaceUsage(NamedTuple):
    """One "Memory Space: NAME (color=N)" section of a memory-usage report:
    its ``name`` (``default``, ``vmem``, ``smem``, ...), ``color`` and
    ``total_bytes``."""

    name: str
    color: int
    total_bytes: int


_MEMORY_SPACE = re.compile(r"\s*Memory Space:(.*)\(color=(\d{1,19})\)")    # name: .strip()
_TOTAL_BYTES = re.compile(r"\s*Total bytes:\s*(\d{1,19})")


def read_memory_usage_report(source) -> List[MemorySpaceUsage]:
    """The memory spaces of a ``*-memory-usage-report.txt`` (text, file object
    or lines; or a path, a ``str`` being one as
    :func:`~xlashape.hlo_module.source_kind` decides) with their total
    bytes, in file order."""
    kind = source_kind(source)
    if kind == "path":
        with open_text(source) as f:
            return read_memory_usage_report(f)
    if isinstance(source, (bytes, bytearray)):
        source = bytes(source).decode("utf-8", "replace")
    out: List[MemorySpaceUsage] = []
    name = None
    color = None
    for line in _lines(source):
        m = _MEMORY_SPACE.match(line)
        if m:
            name, color = m.group(1).strip(), int(m.group(2))
            continue
        m = _TOTAL_BYTES.match(line)
        if m and name is not None:
            out.append(MemorySpaceUsage(name, color, int(m.group(1))))
            name = None
    return out


# -- dump directories ------------------------------------------------------------

_OPTIMIZED = "after_optimizations.txt"
_UNOPTIMIZED = "before_optimizations.txt"
_BUFFER_ASSIGNMENT = "after_optimizations-buffer-assignment.txt"
_MEMORY_REPORT = "after_optimizations-memory-usage-report.txt"
_MODULE_FILE = re.compile(r"module_(\d{1,19})\.")
#: the memory-usage report of a module, by its key
MEMORY_REPORT_TXT = _MEMORY_REPORT
#: what ``--xla_dump_hlo_as_proto`` names a module's ``HloProto`` after its key
HLO_PB_SUFFIXES = ("after_optimizations.hlo.pb", "after_optimizations.hlo.pb.gz")
#: the same for the module before optimizations (text, then protos)
BEFORE_SUFFIXES = ("before_optimizations.txt", "before_optimizations.hlo.pb",
                   "before_optimizations.hlo.pb.gz")


def platform_from_key(key: str) -> Optional[str]:
    """The platform XLA's dump file names show: ``...cl_123.`` (XLA:TPU),
    ``...cpu_``, ``...gpu_`` / ``...sm_9.0a_gpu_``."""
    if re.search(r"(?:^|\.)cl_\d+\.$", key):
        return "tpu"
    if key.endswith("cpu_"):
        return "cpu"
    if key.endswith("gpu_") or "sm_" in key:
        return "gpu"
    return None


class DumpWarning(NamedTuple):
    """A file of a dump directory that was skipped: its ``path`` and why
    (``message``)."""

    path: str
    message: str

    def __str__(self):
        return f"{self.path}: {self.message}"


class DumpModule(NamedTuple):
    """One module of a dump directory: ``key`` (the file-name prefix XLA gave
    all its files, e.g. ``module_0004.jit_f.cl_123.``), its ``number`` (the
    ``module_NNNN`` part, ``None`` if absent), ``hlo_path`` (the module text,
    after optimizations when XLA wrote it), ``optimized`` (``False`` when
    only the text before optimizations exists: its layouts are not yet the
    ones XLA chose), ``buffer_assignment_path`` and ``memory_report_path``
    (``None`` when absent), and ``before_path``: the module's text before
    optimizations when the dump holds it beside the optimized one (its
    header says which parameters jax donated), else ``None``."""

    key: str
    number: Optional[int]
    hlo_path: str
    optimized: bool
    buffer_assignment_path: Optional[str]
    memory_report_path: Optional[str]
    before_path: Optional[str] = None


def find_dump_modules(directory, *, on_warning: Optional[Callable[[DumpWarning], None]] = None
                      ) -> List[DumpModule]:
    """Every module in an XLA dump directory (and its subdirectories), ordered
    by module number: the ``after_optimizations`` text when there is one,
    else the ``before_optimizations`` text, with the buffer assignment and
    memory-usage report that belong to it.

    A file of the dump that cannot be read as one (a dangling or looping
    symbolic link, a FIFO, a device, anything but a regular file or a link to
    one) is left out, and ``on_warning`` gets a :class:`DumpWarning` naming
    it: one bad entry does not stop the others from being read.

    The files are paired in O(n log n) for n files (a long run's dump holds
    tens of thousands of modules).

    Raises ``NotADirectoryError`` / ``FileNotFoundError`` for a path that is
    not a directory; returns ``[]`` for a directory without modules.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        if os.path.exists(directory):
            raise NotADirectoryError(20, "not a directory", directory)
        raise FileNotFoundError(2, "no such directory", directory)
    optimized: Dict[Tuple[str, str], str] = {}
    unoptimized: Dict[Tuple[str, str], str] = {}
    others = set()
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in files:
            path = os.path.join(root, name)
            if not name.endswith((_OPTIMIZED, _UNOPTIMIZED, _BUFFER_ASSIGNMENT, _MEMORY_REPORT)):
                continue
            problem = _unreadable(path)
            if problem is not None:
                if on_warning is not None:
                    on_warning(DumpWarning(path, problem))
                continue
            if name.endswith(_OPTIMIZED):
                optimized[(root, name[: -len(_OPTIMIZED)])] = path
            elif name.endswith(_UNOPTIMIZED):
                unoptimized[(root, name[: -len(_UNOPTIMIZED)])] = path
            elif name.endswith((_BUFFER_ASSIGNMENT, _MEMORY_REPORT)):
                others.add(path)
    # a module's "before" file has no platform part ("module_0004.jit_f.")
    # where the "after" one may ("module_0004.jit_f.cl_123." on TPU,
    # "module_0004.jit_f.cpu_" on CPU): pair them by directory and number+name
    # (_belonging_before_files); the "before" files that belong to an
    # optimized module are not modules of their own
    after_by_root: Dict[str, List[str]] = {}
    before_by_root: Dict[str, List[str]] = {}
    for root, key in optimized:
        after_by_root.setdefault(root, []).append(key)
    for root, key in unoptimized:
        before_by_root.setdefault(root, []).append(key)
    before_of: Dict[Tuple[str, str], str] = {}
    modules: List[DumpModule] = []
    for root, before in before_by_root.items():
        owner = _belonging_before_files(before, after_by_root.get(root, []))
        for after, key in owner.items():
            before_of[(root, after)] = unoptimized[(root, key)]
        # a "before" file that prefixes an optimized module's key is that
        # module's even when a longer one is paired with it (both name the
        # same module): it is no module of its own
        after_keys = sorted(after_by_root.get(root, []))
        taken = set(owner.values())
        for key in before:
            if key in taken:
                continue
            at = bisect_left(after_keys, key)
            if at < len(after_keys) and after_keys[at].startswith(key):
                continue
            modules.append(DumpModule(key, _number(key), unoptimized[(root, key)], False,
                                      None, None))
    for (root, key), path in optimized.items():
        ba = os.path.join(root, key + _BUFFER_ASSIGNMENT)
        rep = os.path.join(root, key + _MEMORY_REPORT)
        modules.append(DumpModule(key, _number(key), path, True,
                                  ba if ba in others else None,
                                  rep if rep in others else None,
                                  before_of.get((root, key))))
    modules.sort(key=lambda m: (m.number if m.number is not None else 1 << 62, m.hlo_path))
    return modules


def _prefix_end(keys: List[str], prefix: str, lo: int) -> int:
    """In the sorted ``keys``, where the run of keys that start with
    ``prefix`` ends, given that it starts at ``lo`` (``bisect_left(keys,
    prefix)``): the keys with a prefix are contiguous in sorted order."""
    hi = len(keys)
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid].startswith(prefix):
            lo = mid + 1
        else:
            hi = mid
    return lo


class _MinTree:
    """The smallest of n integers over a range of positions, with removal
    (a segment tree): both in O(log n)."""

    NONE = 1 << 63

    def __init__(self, values: List[int]):
        size = 1
        while size < len(values):
            size *= 2
        self.size = size
        tree = [self.NONE] * (2 * size)
        tree[size:size + len(values)] = values
        for i in range(size - 1, 0, -1):
            tree[i] = min(tree[2 * i], tree[2 * i + 1])
        self.tree = tree

    def remove(self, pos: int) -> None:
        tree = self.tree
        i = pos + self.size
        tree[i] = self.NONE
        i //= 2
        while i:
            tree[i] = min(tree[2 * i], tree[2 * i + 1])
            i //= 2

    def smallest(self, lo: int, hi: int) -> int:
        """The smallest value at positions ``[lo, hi)`` (``NONE`` if all removed)."""
        tree = self.tree
        best = self.NONE
        lo += self.size
        hi += self.size
        while lo < hi:
            if lo & 1:
                best = min(best, tree[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                best = min(best, tree[hi])
            lo //= 2
            hi //= 2
        return best


def _belonging_before_files(before: List[str], after: List[str]) -> Dict[str, str]:
    """Which of the keys of one directory's ``before_optimizations`` files
    (``before``, in the order they were found) belong to an
    ``after_optimizations`` module (keys ``after``): ``{after key: before
    key}``, in O(n log n) (a "before" key may belong to several modules; the
    "before" keys not among the values are modules of their own):

    1. a "before" key that is a prefix of an "after" key is that module's
       ("module_0004.jit_f." of "module_0004.jit_f.cl_123."; of several such
       keys, the longest); the "after" modules that have one are paired;
    2. XLA may give the optimized module a new number
       (module_0003.jit_f.before_optimizations.txt,
       module_0004.jit_f...after_optimizations.txt): a "before" file left
       over, in order of number, belongs to the unpaired optimized module
       whose name (the key without its "module_NNNN.") starts with its own,
       numbered the same or later (or without a number), the first by
       number and then key -- which is then paired.
    """
    owner: Dict[str, str] = {}
    if not after:
        return owner
    keys = sorted(after)
    n = len(keys)
    # 1: the "after" keys that start with a "before" key are a run of the
    # sorted keys; mark the runs (+1 at the start, -1 past the end). Each
    # module belongs to its longest "before" key: the keys come longest
    # first and each takes the modules of its run no longer one has taken,
    # found by skipping the taken ones (``skip``: a position's next candidate,
    # its paths shortened as they are walked), so each module is taken once
    taken = set()
    cover = [0] * (n + 1)
    skip = list(range(n + 1))

    def untaken(i: int) -> int:
        root = i
        while skip[root] != root:
            root = skip[root]
        while skip[i] != root:
            skip[i], i = root, skip[i]
        return root

    for key in sorted(before, key=len, reverse=True):
        lo = bisect_left(keys, key)
        hi = _prefix_end(keys, key, lo)
        if hi > lo:
            taken.add(key)
            cover[lo] += 1
            cover[hi] -= 1
            i = untaken(lo)
            while i < hi:
                owner[keys[i]] = key
                skip[i] = i + 1
                i = untaken(i + 1)
    leftover = [key for key in before if key not in taken]
    if not leftover:
        return owner
    free = []
    running = 0
    for i, key in enumerate(keys):
        running += cover[i]
        if not running:
            free.append(key)
    if not free:
        return owner
    # 2: the free modules by name (a name's candidates are a run of them),
    # each holding its rank by (number, key) in a tree that gives the run's
    # first; the leftovers come in order of number, so a module numbered
    # below the current one is never a candidate again and leaves the tree
    late = 1 << 62     # a module without a number comes after the numbered ones
    name_of = {k: _MODULE_FILE.sub("", k, count=1) for k in free + leftover}
    by_name = sorted(free, key=lambda k: (name_of[k], k))
    names = [name_of[k] for k in by_name]
    numbers = [_number(k) for k in by_name]
    order = sorted(range(len(by_name)), key=lambda i: (late if numbers[i] is None else numbers[i],
                                                       by_name[i]))
    rank = [0] * len(by_name)
    for r, i in enumerate(order):
        rank[i] = r
    tree = _MinTree(rank)
    numbered = sorted((x, i) for i, x in enumerate(numbers) if x is not None)
    below = 0
    for key in sorted(leftover, key=lambda k: _number(k) or 0):
        least = _number(key) or 0
        while below < len(numbered) and numbered[below][0] < least:
            tree.remove(numbered[below][1])
            below += 1
        name = name_of[key]
        lo = bisect_left(names, name)
        r = tree.smallest(lo, _prefix_end(names, name, lo))
        if r != _MinTree.NONE:
            tree.remove(order[r])
            owner[by_name[order[r]]] = key
    return owner


def pair_before_files(before: List[str], after: List[str]) -> Dict[str, str]:
    """``{after key: before key}`` of one directory's files: which module
    before optimizations (keys ``before``) each optimized module (keys
    ``after``) comes from, as :func:`find_dump_modules` pairs them."""
    return _belonging_before_files(before, after)


def before_file_of(path: str, suffixes=BEFORE_SUFFIXES[:1]) -> Optional[str]:
    """The module text (or, with ``suffixes``, proto) before optimizations
    that belongs beside an optimized module's file ``path``
    (``...after_optimizations...``), or ``None``: XLA names it with a prefix
    of the optimized file's key (``module_0004.jit_f.`` for
    ``module_0004.jit_f.cl_123.``), the longest that exists is taken (what
    :func:`find_dump_modules` pairs first; a renumbered module is not
    found from one file)."""
    d, base = os.path.split(os.fspath(path))
    cut = base.find("after_optimizations")
    if cut < 0:
        return None
    key = base[:cut]
    for end in range(len(key), 0, -1):
        if key[end - 1] != ".":
            continue
        for suffix in suffixes:
            candidate = os.path.join(d, key[:end] + suffix)
            if _unreadable(candidate) is None and os.path.exists(candidate):
                return candidate
    return None


def _unreadable(path: str) -> Optional[str]:
    """Why ``path`` cannot be read as a file of the dump, or None."""
    try:
        what = _not_regular(os.stat(path).st_mode)
    except OSError as e:
        if os.path.islink(path):
            why = ("a symbolic link that loops" if e.errno == errno.ELOOP
                   else "a dangling symbolic link (its target does not exist)"
                   if isinstance(e, FileNotFoundError)
                   else f"a symbolic link that cannot be followed ({e.strerror})")
        else:
            why = f"cannot be read ({e.strerror or e})"
        return f"skipped, {why}"
    if what is not None:
        return f"skipped, {what}, not a regular file"
    return None


def _number(key: str) -> Optional[int]:
    m = _MODULE_FILE.match(key)
    return int(m.group(1)) if m else None
