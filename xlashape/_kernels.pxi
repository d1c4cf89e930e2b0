# Bulk kernels for LayoutArray: pack (numpy -> physical), unpack (physical ->
# numpy), relayout (physical -> physical) and fill are all one copy between
# two "sides". A side is either a compiled offset program (a physical buffer)
# or plain byte strides (a numpy array, or a 0-stride source for fill).
#
# Byte-addressable elements are copied in runs: along one logical dimension
# both sides promise equally spaced elements (the plan's minor_run /
# minor_stride; a strided side promises that along every dimension), so one
# offset computation per side serves a whole run, copied by memcpy when both
# sides are contiguous. When the two sides' fast dimensions differ (a
# transpose), the copy goes by square blocks so both sides stay in cache.
# Sub-byte packed elements (E(n)) are moved element by element with shifts.
# Every kernel runs without the GIL and touches no Python object.

from libc.stdint cimport INT64_MAX
from libc.string cimport memset

cdef enum:
    TRANSPOSE_BLOCK = 64    # edge of the square blocks of the transposing copy
    ROW_BLOCK = 8           # runs visited together along the second dimension
    ZIP_BYTES = 4096        # staging buffer of the interleaving copies
    STREAM_THRESHOLD = 8388608   # kernels moving more bytes use streaming stores


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    /* Copy with non-temporal stores: for big kernels this skips the
       read-for-ownership of the destination (a third of the traffic). */
    static inline void xs_stream_copy(char* d, const char* s, int64_t n) {
        if ((((uintptr_t)d) & 15) == 0 && (n & 15) == 0) {
            int64_t k;
            for (k = 0; k < n; k += 16)
                _mm_stream_si128((__m128i*)(d + k), _mm_loadu_si128((const __m128i*)(s + k)));
        } else {
            memcpy(d, s, (size_t)n);
        }
    }
    static inline void xs_store_fence(void) { _mm_sfence(); }
    #else
    static inline void xs_stream_copy(char* d, const char* s, int64_t n) { memcpy(d, s, (size_t)n); }
    static inline void xs_store_fence(void) {}
    #endif
    """
    void xs_stream_copy(char* d, const char* s, int64_t n) noexcept nogil
    void xs_store_fence() noexcept nogil


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
        if stream:
            xs_stream_copy(d, s, n * itemsize)
        else:
            memcpy(d, s, n * itemsize)
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


cdef inline void _block_n(char* dbase, const int64_t* doff, int64_t ds,
                          const char* sbase, const int64_t* soff, int64_t ss,
                          int64_t la, int64_t lb, size_t size) noexcept nogil:
    cdef int64_t i, j
    cdef char* d
    cdef const char* s
    for i in range(la):
        d = dbase + doff[i]
        s = sbase + i * ss
        for j in range(lb):
            memcpy(d + j * ds, s + soff[j], size)


cdef inline void copy_block(char* dbase, const int64_t* doff, int64_t ds,
                            const char* sbase, const int64_t* soff, int64_t ss,
                            int64_t la, int64_t lb, int64_t itemsize) noexcept nogil:
    if itemsize == 4:
        _block_n(dbase, doff, ds, sbase, soff, ss, la, lb, 4)
    elif itemsize == 2:
        _block_n(dbase, doff, ds, sbase, soff, ss, la, lb, 2)
    elif itemsize == 1:
        _block_n(dbase, doff, ds, sbase, soff, ss, la, lb, 1)
    elif itemsize == 8:
        _block_n(dbase, doff, ds, sbase, soff, ss, la, lb, 8)
    else:
        _block_n(dbase, doff, ds, sbase, soff, ss, la, lb, 16)


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


cdef inline bint _aligned2(const char* a, const char* b, const char* c) noexcept nogil:
    return ((<size_t>a) | (<size_t>b) | (<size_t>c)) & 1 == 0


cdef inline void _zip(char* d, const char** srcs, int64_t ss, int64_t ln, int k,
                      int64_t itemsize) noexcept nogil:
    """d[(j*k+q)] = srcs[q][j] : k runs interleaved into one contiguous stretch."""
    cdef int64_t j
    cdef int q
    cdef const uint16_t* a16
    cdef const uint16_t* b16
    cdef uint16_t* o16
    if itemsize == 2 and k == 2 and ss == 2 and _aligned2(d, srcs[0], srcs[1]):
        # the common case (contiguous source rows): a loop the compiler vectorizes
        a16 = <const uint16_t*>srcs[0]
        b16 = <const uint16_t*>srcs[1]
        o16 = <uint16_t*>d
        for j in range(ln):
            o16[2 * j] = a16[j]
            o16[2 * j + 1] = b16[j]
    elif itemsize == 1 and k == 4 and ss == 1:
        for j in range(ln):
            d[4 * j] = srcs[0][j]
            d[4 * j + 1] = srcs[1][j]
            d[4 * j + 2] = srcs[2][j]
            d[4 * j + 3] = srcs[3][j]
    elif itemsize == 2 and k == 2:
        for j in range(ln):
            memcpy(d + 4 * j, srcs[0] + j * ss, 2)
            memcpy(d + 4 * j + 2, srcs[1] + j * ss, 2)
    elif itemsize == 1 and k == 4:
        for j in range(ln):
            d[4 * j] = srcs[0][j * ss]
            d[4 * j + 1] = srcs[1][j * ss]
            d[4 * j + 2] = srcs[2][j * ss]
            d[4 * j + 3] = srcs[3][j * ss]
    else:
        for q in range(k):
            copy_strided(d + q * itemsize, k * itemsize, srcs[q], ss, ln, itemsize, False)


cdef inline void _unzip(char** dsts, int64_t ds, const char* s, int64_t ln, int k,
                        int64_t itemsize) noexcept nogil:
    cdef int64_t j
    cdef int q
    cdef uint16_t* a16
    cdef uint16_t* b16
    cdef const uint16_t* i16
    if itemsize == 2 and k == 2 and ds == 2 and _aligned2(s, dsts[0], dsts[1]):
        a16 = <uint16_t*>dsts[0]
        b16 = <uint16_t*>dsts[1]
        i16 = <const uint16_t*>s
        for j in range(ln):
            a16[j] = i16[2 * j]
            b16[j] = i16[2 * j + 1]
    elif itemsize == 1 and k == 4 and ds == 1:
        for j in range(ln):
            dsts[0][j] = s[4 * j]
            dsts[1][j] = s[4 * j + 1]
            dsts[2][j] = s[4 * j + 2]
            dsts[3][j] = s[4 * j + 3]
    elif itemsize == 2 and k == 2:
        for j in range(ln):
            memcpy(dsts[0] + j * ds, s + 4 * j, 2)
            memcpy(dsts[1] + j * ds, s + 4 * j + 2, 2)
    elif itemsize == 1 and k == 4:
        for j in range(ln):
            dsts[0][j * ds] = s[4 * j]
            dsts[1][j * ds] = s[4 * j + 1]
            dsts[2][j * ds] = s[4 * j + 2]
            dsts[3][j * ds] = s[4 * j + 3]
    else:
        for q in range(k):
            copy_strided(dsts[q], ds, s + q * itemsize, k * itemsize, ln, itemsize, False)


cdef void copy_runs(const Side* dst, const Side* src, const int64_t* dims, int rank,
                    int d, int e, bint stream) noexcept nogil:
    """Byte-addressable copy in runs along logical dim d.

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
                    if ln * 4 * isz <= ZIP_BYTES:
                        k = _group(dst, dims, rank, idx, e, r, e1, sd, isz, &od)
                        if k > 1:
                            for q in range(k):
                                idx[e] = r + q
                                srcs[q] = src.base + side_offset(src, idx, rank)
                            if stream:
                                _zip(stage, srcs, ss, ln, k, isz)
                                xs_stream_copy(dst.base + od, stage, ln * k * isz)
                            else:
                                _zip(dst.base + od, srcs, ss, ln, k, isz)
                            r += k
                            continue
                        k = _group(src, dims, rank, idx, e, r, e1, ss, isz, &os)
                        if k > 1:
                            for q in range(k):
                                idx[e] = r + q
                                dsts[q] = dst.base + side_offset(dst, idx, rank)
                            _unzip(dsts, sd, src.base + os, ln, k, isz)
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


cdef void copy_blocks(const Side* dst, const Side* src, const int64_t* dims, int rank,
                      int a, int b) noexcept nogil:
    """Byte-addressable copy when src's runs go along a and dst's along b:
    square blocks, one offset per block row and column."""
    cdef int64_t idx[MAX_RANK]
    cdef int64_t soff[TRANSPOSE_BLOCK]
    cdef int64_t doff[TRANSPOSE_BLOCK]
    cdef int64_t wsa, ssa, wdb, sdb, a0, b0, la, lb, i, j
    cdef int k
    for k in range(rank):
        idx[k] = 0
    side_window(src, a, &wsa, &ssa)
    side_window(dst, b, &wdb, &sdb)
    while True:
        a0 = 0
        while a0 < dims[a]:
            la = _min3(TRANSPOSE_BLOCK, dims[a] - a0, wsa - a0 % wsa)
            b0 = 0
            while b0 < dims[b]:
                lb = _min3(TRANSPOSE_BLOCK, dims[b] - b0, wdb - b0 % wdb)
                idx[a] = a0
                for j in range(lb):
                    idx[b] = b0 + j
                    soff[j] = side_offset(src, idx, rank)
                idx[b] = b0
                for i in range(la):
                    idx[a] = a0 + i
                    doff[i] = side_offset(dst, idx, rank)
                copy_block(dst.base, doff, sdb, src.base, soff, ssa, la, lb, dst.itemsize)
                b0 += lb
            a0 += la
        idx[a] = 0
        idx[b] = 0
        if not _next_index(idx, dims, rank, a, b):
            break


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
    if a < 0 or a == b or dims[a] == 1:
        d = b if b >= 0 else rank - 1
    elif b < 0 or dims[b] == 1:
        d = a
    else:
        d = -1
    if d >= 0:
        # block along the dim nearest in the physical (program) side
        total = dst.itemsize
        for k in range(rank):
            total *= dims[k]
        # Streaming stores only when the physical buffer is the destination
        # (written in order); into numpy rows (ROW_BLOCK streams) they
        # measured twice as slow as plain stores.
        copy_runs(dst, src, dims, rank, d,
                  near_dim(dst if dst.prog != NULL else src, dims, rank, d),
                  total >= STREAM_THRESHOLD and dst.prog != NULL)
    else:
        copy_blocks(dst, src, dims, rank, a, b)


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
