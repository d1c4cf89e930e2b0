# Bulk kernels for LayoutArray: pack (numpy -> physical), unpack (physical ->
# numpy), relayout (physical -> physical) and fill are all one copy between
# two "sides". A side is either a compiled offset program (a physical buffer)
# or plain byte strides (a numpy array, or a 0-stride source for fill).
#
# Byte-addressable elements are copied in runs: along one logical dimension
# both sides promise equally spaced elements (the plan's minor_run /
# minor_stride; a strided side promises that along every dimension), so one
# offset computation per side serves a whole run. When both sides run along
# the same dimension (pack, unpack, most relayouts) the runs are visited in
# the memory order of the side whose runs are short (the tiled one): all the
# rows of one tile, then the next tile, so that side is read or written
# sequentially and the other one as a few long streams; rows that a sub-tile
# such as (2,1) or (4,1) interleaves are zipped or unzipped with SIMD
# shuffles. When the two sides run along different dimensions (a transpose),
# blocks are transposed through a small contiguous buffer (SIMD in-register
# transposes), the next block's source lines are prefetched, and each
# destination row of the block is written as one contiguous piece. Big
# kernels write with non-temporal (streaming) stores. Sub-byte packed
# elements (E(n)) are moved element by element with shifts.
# Every kernel runs without the GIL and touches no Python object.
#
# This file decides what to copy where; the byte-moving inner loops (SIMD
# copies and streaming stores, row interleaving, block transposes, the
# two-thread split) are plain C in _kernels.c / _kernels.h, declared in
# _core.pxd. Copies between layouts whose tiles combine dimensions ('*') use
# the same C loops, with offsets from the compiled program instead of
# per-dimension tables.

from libc.stdint cimport INT64_MAX
from libc.string cimport memset

cdef enum:
    ROW_BLOCK = 8           # rows visited together when a side gives no hint
    MAX_BAND = 64           # most rows visited together by the run copy
    ZIP_BYTES = 4096        # staging buffer of the general run copy's interleaving
    MAX_EDGE = 128          # longest edge of a transposed block
    BLOCK_BUF = 32768       # most bytes of a block of the transposing copy
    PLANE_BUF_WORDS = 5120  # its buffer in 8-byte words: C rows of R*isz + 64 bytes
    STAGE_WORDS = 2048      # the run copy's unzip staging buffer in 8-byte words
    STREAM_MIN_RUN = 64     # streaming stores only for pieces of a cache line or more
    ROW_STAGE = 512         # bytes per row of the run copy's unzip staging buffer
    ROW_STAGE_ROWS = 16     # rows of that buffer (two of them: this run and the last)

# Tunables, module-level so that the tests can drive every path with small
# arrays (see _kernel_settings).
cdef int64_t _stream_threshold = 8388608   # kernels moving more bytes stream their stores
cdef int64_t _edge_rows = 0                # transposed block edges; 0: by element size
cdef int64_t _edge_cols = 0
cdef bint _prefetch_runs = True
cdef bint _carry = True                    # transposing copy: whole-line writes across bands
cdef int64_t _thread_threshold = 33554432  # kernels moving more bytes may use them


def _default_threads():
    """Threads for big transposing copies: 2 when this process may run on
    two or more CPUs, else 1; ``XLASHAPE_THREADS=1`` (or 2) overrides.
    The measurements behind this default are in benchmarks/README.md
    ("Two threads")."""
    import os
    env = os.environ.get("XLASHAPE_THREADS", "").strip()
    if env in ("1", "2"):
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return 2 if cpus >= 2 else 1


cdef int _threads = _default_threads()     # threads for big kernels (1 or 2)


def _kernel_settings(stream_threshold=None, block=None, threads=None, thread_threshold=None,
                     prefetch_runs=None, carry=None):
    """Internal, for tests and benchmarks: set the size (bytes) from which
    kernels write with streaming stores, the transposing copy's block edges
    ``(rows, cols)`` (``(0, 0)``: chosen by element size), the number of
    threads (1 or 2) for kernels that move at least ``thread_threshold``
    bytes, and whether the run copy prefetches each row's next source run
    (``prefetch_runs``), and whether the transposing copy completes the
    destination lines that one band of rows leaves partial with the next
    band's bytes and writes them whole (``carry``; only with streaming
    stores). Returns the previous settings as a dict, which can be passed back
    to restore them."""
    global _stream_threshold, _edge_rows, _edge_cols, _threads, _thread_threshold
    global _prefetch_runs, _carry
    old = {"stream_threshold": _stream_threshold, "block": (_edge_rows, _edge_cols),
           "threads": _threads, "thread_threshold": _thread_threshold,
           "prefetch_runs": bool(_prefetch_runs), "carry": bool(_carry)}
    if prefetch_runs is not None:
        _prefetch_runs = bool(prefetch_runs)
    if carry is not None:
        _carry = bool(carry)
    if threads is not None:
        if threads not in (1, 2):
            raise ValueError("threads must be 1 or 2")
        _threads = threads
    if thread_threshold is not None:
        if thread_threshold < 0:
            raise ValueError("thread_threshold must be >= 0")
        _thread_threshold = thread_threshold
    if stream_threshold is not None:
        if stream_threshold < 0:
            raise ValueError("stream_threshold must be >= 0")
        _stream_threshold = stream_threshold
    if block is not None:
        r, c = block
        if not (0 <= r <= MAX_EDGE and 0 <= c <= MAX_EDGE) or (r == 0) != (c == 0):
            raise ValueError(f"block edges must be both 0 or both in 1..{MAX_EDGE}")
        _edge_rows, _edge_cols = r, c
    return old


cdef inline int64_t side_offset(const Side* s, const int64_t* idx, int rank) noexcept nogil:
    """Byte offset of a logical index (element offset for a packed side)."""
    cdef int64_t off = 0
    cdef int d
    if s.prog != NULL:
        if s.tabs != NULL:
            for d in range(rank):
                off += s.tabs[d][idx[d]]
        else:
            off = program_offset(s.prog, idx)
        if s.packed_bits:
            return off
        return off * s.itemsize
    if s.tabs != NULL:      # a table side: per-dim offsets, already in final units
        for d in range(rank):
            off += s.tabs[d][idx[d]]
        return off
    for d in range(rank):
        off += idx[d] * s.bstride[d]
    return off


cdef inline void side_window(const Side* s, int d, int64_t* window, int64_t* step) noexcept nogil:
    """Along logical dim d, from any multiple of window[0], the next window[0]
    elements are step[0] bytes (elements, when packed) apart."""
    if s.prog == NULL and s.tabs != NULL:
        window[0] = 1
        step[0] = 0
    elif s.prog == NULL:
        window[0] = INT64_MAX
        step[0] = s.bstride[d]
    elif d == s.prog.minor_dim and s.prog.minor_run > 0:
        window[0] = s.prog.minor_run
        step[0] = s.prog.minor_stride if s.packed_bits else s.prog.minor_stride * s.itemsize
    else:
        window[0] = 1
        step[0] = 0


cdef inline int64_t _min3(int64_t a, int64_t b, int64_t c) noexcept nogil:
    if b < a:
        a = b
    return c if c < a else a


cdef inline void _copy_n(char* d, int64_t ds, const char* s, int64_t ss, int64_t n,
                         size_t size) noexcept nogil:
    cdef int64_t k
    for k in range(n):
        memcpy(d + k * ds, s + k * ss, size)


cdef inline void copy_strided(char* d, int64_t ds, const char* s, int64_t ss, int64_t n,
                              int64_t itemsize, bint stream) noexcept nogil:
    """n elements; the switch gives memcpy a constant size, so each case
    compiles to plain loads and stores."""
    if ds == itemsize and ss == itemsize:
        xs_copy(d, s, n * itemsize, stream)
    elif itemsize == 4:
        _copy_n(d, ds, s, ss, n, 4)
    elif itemsize == 2:
        _copy_n(d, ds, s, ss, n, 2)
    elif itemsize == 1:
        _copy_n(d, ds, s, ss, n, 1)
    elif itemsize == 8:
        _copy_n(d, ds, s, ss, n, 8)
    else:
        _copy_n(d, ds, s, ss, n, 16)


cdef inline bint _next_index(int64_t* idx, const int64_t* dims, int rank,
                             int skip1, int skip2) noexcept nogil:
    """Odometer over every dim but skip1/skip2 (last dim fastest); False at the end."""
    cdef int k = rank - 1
    while k >= 0:
        if k == skip1 or k == skip2:
            k -= 1
            continue
        idx[k] += 1
        if idx[k] < dims[k]:
            return True
        idx[k] = 0
        k -= 1
    return False


cdef inline int _group(const Side* s, const int64_t* dims, int rank, int64_t* idx, int e,
                       int64_t r, int64_t e1, int64_t step, int64_t itemsize,
                       int64_t* first) noexcept nogil:
    """k > 1 if the runs of rows r..r+k-1 (along e) interleave element by
    element in s's buffer (TPU sub-tiles such as (2,1) for bf16, (4,1) for
    s8): then together they are one contiguous stretch. Returns k or 1."""
    cdef int64_t k = step // itemsize
    cdef int64_t q, off
    if s.prog == NULL or e < 0 or step != k * itemsize or k < 2 or k > 4 or r + k > e1:
        return 1
    idx[e] = r
    first[0] = side_offset(s, idx, rank)
    for q in range(1, k):
        idx[e] = r + q
        off = side_offset(s, idx, rank)
        if off != first[0] + q * itemsize:
            return 1
    return <int>k


cdef void copy_runs(const Side* dst, const Side* src, const int64_t* dims, int rank,
                    int d, int e, bint stream) noexcept nogil:
    """Byte-addressable copy in runs along logical dim d, any sides (the
    general path, for programs that are not separable: offsets per run).

    Runs are visited in blocks of ROW_BLOCK positions along dim e (the dim
    whose unit step is nearest in the physical buffer): for T(8,128) that is
    the physical order itself, so one side is written (or read) sequentially
    while the other sees ROW_BLOCK streams, both cache and TLB friendly.
    Rows whose runs interleave in the physical buffer (sub-tiles (2,1),
    (4,1)) are zipped (or unzipped) together, so the physical side is still
    one contiguous stretch.
    """
    cdef int64_t idx[MAX_RANK]
    cdef int64_t wd, sd, ws, ss, p, n, ln, od, os, e0, e1, r, isz = dst.itemsize
    cdef int k, q
    cdef const char* srcs[4]
    cdef char* dsts[4]
    cdef char stage[ZIP_BYTES]
    for k in range(rank):
        idx[k] = 0
    side_window(dst, d, &wd, &sd)
    side_window(src, d, &ws, &ss)
    n = dims[d]
    while True:
        e0 = 0
        while True:
            e1 = e0 + ROW_BLOCK if e >= 0 else 1
            if e >= 0 and e1 > dims[e]:
                e1 = dims[e]
            p = 0
            while p < n:
                ln = _min3(n - p, wd - p % wd, ws - p % ws)
                idx[d] = p
                r = e0
                while r < e1:
                    if e >= 0 and ln * 4 * isz <= ZIP_BYTES:
                        k = _group(dst, dims, rank, idx, e, r, e1, sd, isz, &od)
                        if k > 1:
                            for q in range(k):
                                idx[e] = r + q
                                srcs[q] = src.base + side_offset(src, idx, rank)
                            if stream:
                                xs_zip(stage, srcs, ss, ln, k, isz, 0)
                                xs_copy(dst.base + od, stage, ln * k * isz, 1)
                            else:
                                xs_zip(dst.base + od, srcs, ss, ln, k, isz, 0)
                            r += k
                            continue
                        k = _group(src, dims, rank, idx, e, r, e1, ss, isz, &os)
                        if k > 1:
                            for q in range(k):
                                idx[e] = r + q
                                dsts[q] = dst.base + side_offset(dst, idx, rank)
                            xs_unzip_direct(dsts, sd, src.base + os, ln, k, isz)
                            r += k
                            continue
                    if e >= 0:
                        idx[e] = r
                    od = side_offset(dst, idx, rank)
                    os = side_offset(src, idx, rank)
                    copy_strided(dst.base + od, sd, src.base + os, ss, ln, isz, stream)
                    r += 1
                p += ln
            if e < 0 or e1 >= dims[e]:
                break
            e0 = e1
        idx[d] = 0
        if e >= 0:
            idx[e] = 0
        if not _next_index(idx, dims, rank, d, e):
            break
    if stream:
        xs_store_fence()


cdef int near_dim(const Side* s, const int64_t* dims, int rank, int d) noexcept nogil:
    """The dim other than d whose unit step moves least in s's buffer (-1: none)."""
    cdef int k, best = -1
    cdef int64_t step, best_step = INT64_MAX
    for k in range(rank):
        if k == d or dims[k] < 2:
            continue
        if s.tabs != NULL:
            step = s.tabs[k][1] - s.tabs[k][0]
        elif s.prog == NULL:
            step = s.bstride[k]
        else:
            step = 0 if best < 0 else INT64_MAX   # no cheap answer: the last such dim
            if best < 0 or k > best:
                best = k
            continue
        if step < 0:
            step = -step
        if step < best_step:
            best_step = step
            best = k
    return best



cdef inline bint side_separable(const Side* s) noexcept nogil:
    """True when the offset is a sum of one share per dimension (dim_offset):
    strided sides, table sides, and programs with per-dimension tables."""
    return s.prog == NULL or s.tabs != NULL


cdef inline int64_t dim_offset(const Side* s, int k, int64_t i) noexcept nogil:
    """Dimension k's share of a separable side's offset at index i (bytes;
    elements when packed)."""
    if s.tabs == NULL:
        return i * s.bstride[k]
    if s.prog == NULL or s.packed_bits:
        return s.tabs[k][i]
    return s.tabs[k][i] * s.itemsize


cdef inline xs_dimoff _dimoff(const Side* s, int k) noexcept nogil:
    """Dimension k's share of a separable side's byte offset, for the C kernels."""
    cdef xs_dimoff o
    if s.tabs == NULL:
        o.tab = NULL
        o.scale = s.bstride[k]
    else:
        o.tab = s.tabs[k]
        o.scale = 1 if s.prog == NULL else s.itemsize
    return o


cdef inline char* _line_align(char* p) noexcept nogil:
    """p rounded up to a cache line (for buffers declared 64 bytes longer)."""
    return p + ((64 - (<size_t>p & 63)) & 63)


cdef inline int64_t sep_base(const Side* s, const int64_t* idx, int rank, int skip1,
                             int skip2) noexcept nogil:
    """A separable side's offset summed over every dimension but skip1/skip2
    (a table side's shares at index 0 need not be 0)."""
    cdef int64_t off = 0
    cdef int k
    for k in range(rank):
        if k != skip1 and k != skip2:
            off += dim_offset(s, k, idx[k])
    return off


cdef int64_t band_rows(const Side* t, const int64_t* dims, int d, int e,
                       int64_t window) noexcept nogil:
    """How many rows along e the run copy visits together: the rows whose
    runs lie in t's buffer before t's next run along d (the rows of one
    tile), at most MAX_BAND; ROW_BLOCK when t gives no such hint."""
    cdef int64_t r, span, n, off
    if e < 0:
        return 1
    n = dims[e] if dims[e] < MAX_BAND else MAX_BAND
    if window >= dims[d]:
        return ROW_BLOCK if ROW_BLOCK < n else n
    span = dim_offset(t, d, window) - dim_offset(t, d, 0)
    if span < 0:
        span = -span
    r = 1
    while r < n:
        off = dim_offset(t, e, r) - dim_offset(t, e, 0)
        if off < 0:
            off = -off
        if off >= span:
            break
        r += 1
    return r


cdef inline int _zip_rows(const int64_t* off, int r, int nb, int64_t step,
                          int64_t isz) noexcept nogil:
    """k (2..4) if rows r..r+k-1, whose runs start at off[r..], interleave
    element by element (the run's step is k elements and row r+q starts q
    elements after row r): together they are one contiguous stretch. Else 1."""
    cdef int64_t k = step // isz
    cdef int q
    if step != k * isz or k < 2 or k > 4 or r + k > nb:
        return 1
    for q in range(1, <int>k):
        if off[r + q] != off[r] + q * isz:
            return 1
    return <int>k


cdef inline void _band_run(char** drow, int64_t sd, const char** srow, int64_t ss,
                           const int* grp, int nb, int64_t ln, int64_t isz,
                           bint stream) noexcept nogil:
    """One run of ln elements for each of nb rows (row r from srow[r] to
    drow[r]); grp[r] > 1 zips that many rows into the destination, < -1
    unzips them from the source."""
    cdef int r = 0
    cdef int k, q
    cdef const char* srcs[4]
    cdef char* dsts[4]
    while r < nb:
        k = grp[r]
        if k > 1:
            for q in range(k):
                srcs[q] = srow[r + q]
            xs_zip(drow[r], srcs, ss, ln, k, isz, stream and ln * k * isz >= STREAM_MIN_RUN)
            r += k
        elif k < -1:
            k = -k
            for q in range(k):
                dsts[q] = drow[r + q]
            xs_unzip(dsts, sd, srow[r], ln, k, isz, stream and ln * isz >= STREAM_MIN_RUN)
            r += k
        else:
            copy_strided(drow[r], sd, srow[r], ss, ln, isz,
                         stream and ln * isz >= STREAM_MIN_RUN)
            r += 1


cdef void copy_runs_fast(const Side* dst, const Side* src, const int64_t* dims, int rank,
                         int d, bint stream) noexcept nogil:
    """Byte-addressable copy in runs along d, both sides separable.

    The rows along e (the dim nearest in the buffer of the side with the
    shorter runs, t) are visited in bands of t's tile rows: for each run
    position along d, every row of the band. For a tiled side that is its
    memory order (one tile after the other), while the other side sees one
    stream per row of the band.

    With streaming stores into a destination whose rows are contiguous
    along d (unpacking into numpy), each row is written line by line across
    run boundaries (xs_row_run): numpy's big arrays start 16 bytes into a
    page, so runs written one by one would leave a partly written line at
    every run's end, and a streaming store to part of a line costs a
    read-modify-write in memory (benchmarks/README.md, "Notes moved out of
    the code", has what that cost).
    """
    cdef int64_t idx[MAX_RANK]
    cdef int64_t rd[MAX_BAND]
    cdef int64_t rs[MAX_BAND]
    cdef int grp[MAX_BAND]
    cdef char* drow[MAX_BAND]
    cdef const char* srow[MAX_BAND]
    cdef char* ur[4]
    cdef double stage_store[STAGE_WORDS + 8]     # 2 x ROW_STAGE_ROWS x ROW_STAGE
    cdef char* stage = _line_align(<char*>stage_store)
    cdef int64_t wd, sd, ws, ss, n, ne, band, e0, p, ln, cd, cs, bd, bs
    cdef int64_t L, prev_l, next_l, nxt, prev_cs, cut_d, cut_s, acc, prev_acc, piece_cd
    cdef int64_t cs_next = 0
    cdef bint straddle, defer, unzips, piece_deferred, plain
    cdef xs_dimoff ddim, sdim
    cdef int64_t isz = dst.itemsize
    cdef int e, k, r, q, nb, par
    cdef bint rowmode
    cdef const Side* t
    for k in range(rank):
        idx[k] = 0
    side_window(dst, d, &wd, &sd)
    side_window(src, d, &ws, &ss)
    t = src if ws < wd else dst
    e = near_dim(t, dims, rank, d)
    band = band_rows(t, dims, d, e, ws if ws < wd else wd)
    n = dims[d]
    ne = dims[e] if e >= 0 else 1
    ddim = _dimoff(dst, d)
    sdim = _dimoff(src, d)
    while True:
        bd = sep_base(dst, idx, rank, d, e)
        bs = sep_base(src, idx, rank, d, e)
        e0 = 0
        while e0 < ne:
            nb = <int>(band if band < ne - e0 else ne - e0)
            for r in range(nb):
                rd[r] = bd
                rs[r] = bs
                if e >= 0:
                    rd[r] += dim_offset(dst, e, e0 + r)
                    rs[r] += dim_offset(src, e, e0 + r)
            r = 0
            rowmode = stream and sd == isz and wd >= n and ws < n
            unzips = False
            plain = True
            while r < nb:
                k = _zip_rows(rd, r, nb, sd, isz)
                if k > 1:
                    grp[r] = k
                else:
                    k = _zip_rows(rs, r, nb, ss, isz)
                    grp[r] = -k if k > 1 else 1
                if grp[r] == 1 and ss != isz:
                    rowmode = False
                if grp[r] != 1:
                    plain = False
                if grp[r] < -1:
                    unzips = True
                    if ws * isz > ROW_STAGE or nb > ROW_STAGE_ROWS:
                        rowmode = False
                r += k
            if not rowmode and plain and sd == isz and ss == isz:
                xs_band_runs(dst.base, rd, ddim, wd, src.base, rs, sdim, ws, nb, n, isz,
                             stream)
                e0 += nb
                continue
            p = 0
            prev_l = 0
            prev_cs = 0
            par = 0
            acc = 0
            prev_acc = 0
            piece_cd = 0
            piece_deferred = False
            cut_d = 0      # the next multiple of each side's window (no divisions per run)
            cut_s = 0
            while p < n:
                while cut_d <= p:
                    cut_d += wd
                while cut_s <= p:
                    cut_s += ws
                ln = _min3(n, cut_d, cut_s) - p
                cd = dim_offset(dst, d, p)
                cs = dim_offset(src, d, p)
                if not rowmode:
                    for r in range(nb):
                        drow[r] = dst.base + rd[r] + cd
                        srow[r] = src.base + rs[r] + cs
                    _band_run(drow, sd, srow, ss, grp, nb, ln, isz, stream)
                else:
                    L = ln * isz
                    nxt = p + ln
                    next_l = 0          # the row's next run, in bytes (0: none)
                    if nxt < n:
                        next_l = (_min3(n, cut_d if cut_d > nxt else cut_d + wd,
                                        cut_s if cut_s > nxt else cut_s + ws) - nxt) * isz
                        cs_next = dim_offset(src, d, nxt)
                    # rows copied from contiguous source runs: one piece per run;
                    # the previous run deferred its partial last line to this one
                    # iff both are a line or longer
                    straddle = L >= 64 and prev_l >= 64
                    defer = L >= 64 and next_l >= 64
                    r = 0
                    while r < nb:
                        k = grp[r]
                        if k < -1:
                            # unzipped rows: gathered in the stage, a few runs per piece
                            k = -k
                            for q in range(k):
                                ur[q] = stage + ((par * ROW_STAGE_ROWS) + r + q) * ROW_STAGE + acc
                            xs_unzip_direct(ur, isz, src.base + rs[r] + cs, ln, k, isz)
                            if next_l and _prefetch_runs:
                                # the source of this group's next run, ahead of time
                                xs_prefetch_span(src.base + rs[r] + cs_next, next_l * k)
                            r += k
                        else:
                            xs_row_run(dst.base + rd[r] + cd, src.base + rs[r] + cs, L,
                                       src.base + rs[r] + prev_cs + prev_l if straddle else NULL,
                                       defer)
                            if next_l and _prefetch_runs:
                                xs_prefetch_span(src.base + rs[r] + cs_next, next_l)
                            r += 1
                    prev_l = L
                    prev_cs = cs
                    if unzips:
                        if acc == 0:
                            piece_cd = cd
                        acc += L
                        if next_l == 0 or acc + next_l > ROW_STAGE:
                            # write the stage rows; same straddle/defer rule per piece
                            defer = acc >= 64 and next_l >= 64
                            r = 0
                            while r < nb:
                                k = grp[r]
                                if k < -1:
                                    k = -k
                                    for q in range(k):
                                        xs_row_run(
                                            dst.base + rd[r + q] + piece_cd,
                                            stage + ((par * ROW_STAGE_ROWS) + r + q) * ROW_STAGE,
                                            acc,
                                            stage + (((1 - par) * ROW_STAGE_ROWS) + r + q)
                                            * ROW_STAGE + prev_acc if piece_deferred else NULL,
                                            defer)
                                    r += k
                                else:
                                    r += 1
                            piece_deferred = defer
                            prev_acc = acc
                            acc = 0
                            par = 1 - par
                p += ln
            e0 += nb
        if not _next_index(idx, dims, rank, d, e):
            break
    if stream:
        xs_store_fence()


cdef struct PlaneCtx:
    # xs_plane's context for a side that is not separable
    const Side* side
    int64_t* idx         # the plane loop's index: the other dimensions
    int rank
    int a
    int b


cdef int64_t _plane_offset(void* ctx, int64_t i, int64_t j) noexcept nogil:
    """Byte offset of element (a = i, b = j) of a side that is not separable
    (its program run at that index, the other dimensions as the plane loop
    set them)."""
    cdef PlaneCtx* c = <PlaneCtx*>ctx
    c.idx[c.a] = i
    c.idx[c.b] = j
    return side_offset(c.side, c.idx, c.rank)


cdef inline const char* _plane_of(xs_plane* p, PlaneCtx* ctx, const Side* s, int64_t* idx,
                                  int rank, int a, int b) noexcept nogil:
    """Fill p with how s's plane (a, b) at idx is addressed; returns its base."""
    if side_separable(s):
        p.A = _dimoff(s, a)
        p.B = _dimoff(s, b)
        p.fn = NULL
        p.ctx = NULL
        return s.base + sep_base(s, idx, rank, a, b)
    ctx.side = s
    ctx.idx = idx
    ctx.rank = rank
    ctx.a = a
    ctx.b = b
    p.fn = _plane_offset
    p.ctx = ctx
    return s.base


cdef void copy_transpose(const Side* dst, const Side* src, const int64_t* dims, int rank,
                         int a, int b, bint stream) noexcept nogil:
    """Byte-addressable copy when src's runs go along a and dst's along b.

    Each plane of dims a and b is copied by xs_transpose_plane: blocks of up
    to R (along b) x C (along a) elements, cut at both sides' run windows,
    go through a contiguous buffer. The block's R source rows (each a run of
    C elements) are transposed into the buffer with SIMD in-register
    transposes, then each of its C rows is written to the destination as one
    contiguous run of R elements. Blocks are visited along a first, so each
    source row continues where the last block left it; the next block's
    source lines are prefetched while this one is transposed. Reading whole
    source lines into a buffer is what keeps power-of-two strides (rows that
    all map to the same cache sets, made certain by 2 MiB pages) from
    evicting each other.

    A side that is not separable (tiles that combine dimensions with '*')
    is addressed through its offset program, once per block row
    (_plane_offset); such planes stay on one thread.
    """
    cdef int64_t idx[MAX_RANK]
    cdef double buf_store[PLANE_BUF_WORDS + 8]
    cdef char* buf = _line_align(<char*>buf_store)
    cdef int64_t wsa, ssa, wdb, sdb, R, C, isz = dst.itemsize
    cdef xs_plane dp, sp
    cdef PlaneCtx dctx, sctx
    cdef char* dbase
    cdef const char* sbase
    cdef int k
    cdef bint two
    cdef int sflags = (1 | (2 if _carry else 0)) if stream else 0
    R = _edge_rows
    C = _edge_cols
    if R == 0:
        if isz == 1:
            R, C = 128, 128
        elif isz == 2:
            R, C = 128, 64
        elif isz == 4:
            # 512-byte pieces of 64 source rows: faster than 128 x 64 at
            # every size measured, rows a multiple of 4 KiB apart or not,
            # one thread or two (benchmarks/README.md, issue 29)
            R, C = 64, 128
        elif isz == 8:
            R, C = 32, 64
        else:
            R, C = 32, 32
    while R * C * isz > BLOCK_BUF:
        if R >= C:
            R = (R + 1) // 2
        else:
            C = (C + 1) // 2
    side_window(src, a, &wsa, &ssa)
    side_window(dst, b, &wdb, &sdb)
    for k in range(rank):
        idx[k] = 0
    two = _threads == 2 and dims[a] * dims[b] * isz >= _thread_threshold and dims[b] >= 2 * R
    while True:
        dbase = <char*>_plane_of(&dp, &dctx, dst, idx, rank, a, b)
        sbase = _plane_of(&sp, &sctx, src, idx, rank, a, b)
        if two:
            xs_transpose_plane2(dbase, &dp, sbase, &sp, dims[a], wsa, ssa, dims[b], wdb, sdb,
                                isz, R, C, sflags)
        else:
            xs_transpose_plane(dbase, &dp, sbase, &sp, dims[a], wsa, ssa, dims[b], wdb, sdb,
                               isz, R, C, sflags, 0, dims[b], buf)
        if not _next_index(idx, dims, rank, a, b):
            break
    if stream:
        xs_store_fence()


cdef inline uint64_t _get_code(const Side* s, int64_t off, uint64_t mask) noexcept nogil:
    cdef int64_t bit
    if s.packed_bits:
        bit = off * s.packed_bits
        return ((<const uint8_t*>s.base)[bit >> 3] >> (bit & 7)) & mask
    return (<const uint8_t*>s.base)[off] & mask


cdef inline void _put_code(const Side* s, int64_t off, uint64_t code, uint64_t mask) noexcept nogil:
    cdef int64_t bit
    cdef uint8_t* p
    cdef int sh
    if s.packed_bits:
        bit = off * s.packed_bits
        p = (<uint8_t*>s.base) + (bit >> 3)
        sh = bit & 7
        p[0] = <uint8_t>((p[0] & ~(mask << sh)) | (code << sh))
    else:
        (<uint8_t*>s.base)[off] = <uint8_t>code


cdef void copy_codes(const Side* dst, const Side* src, const int64_t* dims, int rank,
                     int d, uint64_t mask) noexcept nogil:
    """Sub-byte copy (either side E(n)-packed): runs along d, element by
    element, codes kept in the low bits (ml_dtypes' own byte format)."""
    cdef int64_t idx[MAX_RANK]
    cdef int64_t wd, sd, ws, ss, p, n, ln, od, os, j
    cdef int k
    for k in range(rank):
        idx[k] = 0
    side_window(dst, d, &wd, &sd)
    side_window(src, d, &ws, &ss)
    n = dims[d]
    while True:
        p = 0
        while p < n:
            ln = _min3(n - p, wd - p % wd, ws - p % ws)
            idx[d] = p
            od = side_offset(dst, idx, rank)
            os = side_offset(src, idx, rank)
            for j in range(ln):
                _put_code(dst, od + j * sd, _get_code(src, os + j * ss, mask), mask)
            p += ln
        idx[d] = 0
        if not _next_index(idx, dims, rank, d, -1):
            break



cdef void copy_sides(const Side* dst, const Side* src, const int64_t* dims, int rank,
                     uint64_t mask) noexcept nogil:
    """Copy every logical element of src to dst (the one entry point)."""
    cdef int d, a, b, k
    cdef int64_t od, os, total
    cdef int64_t zero[1]
    cdef bint stream
    for k in range(rank):
        if dims[k] == 0:
            return
    if rank == 0:
        zero[0] = 0
        od = side_offset(dst, zero, 0)
        os = side_offset(src, zero, 0)
        if dst.packed_bits or src.packed_bits:
            _put_code(dst, od, _get_code(src, os, mask), mask)
        else:
            memcpy(dst.base + od, src.base + os, dst.itemsize)
        return
    a = src.minor_dim
    b = dst.minor_dim
    if dst.packed_bits or src.packed_bits:
        copy_codes(dst, src, dims, rank, b if b >= 0 else rank - 1, mask)
        return
    total = dst.itemsize
    for k in range(rank):
        total *= dims[k]
    stream = total >= _stream_threshold
    if a < 0 or a == b or dims[a] == 1:
        d = b if b >= 0 else rank - 1
    elif b < 0 or dims[b] == 1:
        d = a
    else:
        copy_transpose(dst, src, dims, rank, a, b, stream)
        return
    if side_separable(dst) and side_separable(src):
        copy_runs_fast(dst, src, dims, rank, d, stream)
    else:
        # layouts whose tiles combine dimensions ('*'): offsets by program.
        # Streaming stores only when the physical buffer is the destination
        # (written in order).
        copy_runs(dst, src, dims, rank, d,
                  near_dim(dst if dst.prog != NULL else src, dims, rank, d),
                  stream and dst.prog != NULL)


cdef int side_from_ndarray(Side* s, cnp.ndarray arr) except -1:
    """A strided side over a numpy array (any strides, negative and 0 too)."""
    cdef int d, rank = cnp.PyArray_NDIM(arr)
    cdef int64_t best = INT64_MAX
    cdef int64_t st
    s.base = <char*>cnp.PyArray_DATA(arr)
    s.prog = NULL
    s.tabs = NULL
    s.itemsize = cnp.PyArray_ITEMSIZE(arr)
    s.packed_bits = 0
    s.minor_dim = rank - 1
    for d in range(rank):
        st = cnp.PyArray_STRIDES(arr)[d]
        s.bstride[d] = st
        if cnp.PyArray_DIMS(arr)[d] > 1:
            if st < 0:
                st = -st
            if st < best or (st == best):
                best = st
                s.minor_dim = d
    return 0


cdef void fill_pattern(char* buf, int64_t nbytes, const char* pattern, int64_t size) noexcept nogil:
    """Repeat `size` bytes of pattern over buf (memset when it is one byte value)."""
    cdef int64_t k, done
    cdef bint same = True
    for k in range(1, size):
        if pattern[k] != pattern[0]:
            same = False
            break
    if same:
        memset(buf, pattern[0], nbytes)
        return
    done = 0
    while done < size and done < nbytes:
        buf[done] = pattern[done % size]
        done += 1
    # double the filled prefix until the buffer is full
    while done < nbytes:
        k = done if done <= nbytes - done else nbytes - done
        memcpy(buf + done, buf, k)
        done += k
