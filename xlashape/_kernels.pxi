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

from libc.stdint cimport INT64_MAX
from libc.string cimport memset

cdef enum:
    ROW_BLOCK = 8           # rows visited together when a side gives no hint
    MAX_BAND = 64           # most rows visited together by the run copy
    ZIP_BYTES = 4096        # staging buffer of the general interleaving copy
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
    Measured on an otherwise idle 2-core VM (benchmarks/README.md):
    f32[8192,8192] {1,0}->{0,1} into an existing array at 1.00x np.copyto's
    time with two threads against 1.83x with one."""
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


cdef extern from *:
    """
    #include <stdint.h>
    #include <stdlib.h>
    #include <string.h>
    /* the transposing copy's block buffer: up to 128 rows of at most
       32768 / 128 block bytes plus a 64-byte pad each (see PLANE_BUF_WORDS) */
    #define XS_BLOCK_BUF_BYTES (32768 + 128 * 64)
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #define XS_SSE2 1
    #endif

    /* Hint that the line at p is about to be read (never faults). */
    static inline void xs_prefetch(const char* p) {
    #if defined(__GNUC__)
        __builtin_prefetch(p, 0, 3);
    #else
        (void)p;
    #endif
    }

    /* Prefetch the lines of [p, p + n). */
    static inline void xs_prefetch_span(const char* p, int64_t n) {
        int64_t c;
        for (c = 0; c < n; c += 64)
            xs_prefetch(p + c);
    }

    /* n bytes from s to d. With stream, the whole cache lines are written
       with non-temporal stores: for big kernels this skips the
       read-for-ownership of the destination (a third of the traffic). */
    static inline void xs_copy(char* d, const char* s, int64_t n, int stream) {
    #ifdef XS_SSE2
        if (stream && n >= 128) {
            /* partial lines at either end go through the cache: a streaming
               store to part of a line costs a read-modify-write in memory */
            int64_t head = (int64_t)((-(uintptr_t)d) & 63), k = 0;
            if (head) {
                memcpy(d, s, (size_t)head);
                d += head; s += head; n -= head;
            }
            for (; k + 64 <= n; k += 64) {
                __m128i a = _mm_loadu_si128((const __m128i*)(s + k));
                __m128i b = _mm_loadu_si128((const __m128i*)(s + k + 16));
                __m128i c = _mm_loadu_si128((const __m128i*)(s + k + 32));
                __m128i e = _mm_loadu_si128((const __m128i*)(s + k + 48));
                _mm_stream_si128((__m128i*)(d + k), a);
                _mm_stream_si128((__m128i*)(d + k + 16), b);
                _mm_stream_si128((__m128i*)(d + k + 32), c);
                _mm_stream_si128((__m128i*)(d + k + 48), e);
            }
            if (k < n)
                memcpy(d + k, s + k, (size_t)(n - k));
            return;
        }
    #endif
        (void)stream;
        memcpy(d, s, (size_t)n);
    }

    static inline void xs_store_fence(void) {
    #ifdef XS_SSE2
        _mm_sfence();
    #endif
    }

    /* 64 bytes from s to the line-aligned d with streaming stores. */
    static inline void xs_nt64(char* d, const char* s) {
    #ifdef XS_SSE2
        __m128i a = _mm_loadu_si128((const __m128i*)s);
        __m128i b = _mm_loadu_si128((const __m128i*)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i*)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i*)(s + 48));
        _mm_stream_si128((__m128i*)d, a);
        _mm_stream_si128((__m128i*)(d + 16), b);
        _mm_stream_si128((__m128i*)(d + 32), c);
        _mm_stream_si128((__m128i*)(d + 48), e);
    #else
        memcpy(d, s, 64);
    #endif
    }

    /* One run of L bytes of a destination row that is written run after run
       (contiguous across runs), with streaming stores for whole lines only.
       The line that the run starts inside is completed from the previous
       run's last bytes (its source ends at prev_end, NULL: write the head
       with plain stores); with defer, the partial line at the end is left
       for the next run. The caller keeps both sides consistent: runs of
       fewer than 64 bytes never straddle nor defer. */
    static void xs_row_run(char* d, const char* s, int64_t L, const char* prev_end, int defer) {
        int64_t head, k;
        if (L < 64) {
            memcpy(d, s, (size_t)L);
            return;
        }
        head = (int64_t)((-(uintptr_t)d) & 63);
        if (head) {
            int64_t back = 64 - head;
    #ifdef XS_SSE2
            if ((head & 15) == 0) {
                /* numpy's usual case: 16-byte steps, no byte-wise copies */
                int64_t q;
                if (prev_end) {
                    for (q = 0; q < back; q += 16)
                        _mm_stream_si128((__m128i*)(d - back + q),
                                         _mm_loadu_si128((const __m128i*)(prev_end - back + q)));
                    for (q = 0; q < head; q += 16)
                        _mm_stream_si128((__m128i*)(d + q), _mm_loadu_si128((const __m128i*)(s + q)));
                } else {
                    for (q = 0; q < head; q += 16)
                        _mm_storeu_si128((__m128i*)(d + q), _mm_loadu_si128((const __m128i*)(s + q)));
                }
            } else
    #endif
            if (prev_end) {
                char line[64];
                memcpy(line, prev_end - back, (size_t)back);
                memcpy(line + back, s, (size_t)head);
                xs_nt64(d - back, line);
            } else {
                memcpy(d, s, (size_t)head);
            }
        }
        for (k = head; k + 64 <= L; k += 64)
            xs_nt64(d + k, s + k);
        if (k < L && !defer)
            memcpy(d + k, s + k, (size_t)(L - k));
    }

    #ifdef XS_SSE2
    static inline void xs_put16(char* p, __m128i v, int nt) {
        if (nt)
            _mm_stream_si128((__m128i*)p, v);
        else
            _mm_storeu_si128((__m128i*)p, v);
    }
    /* the even (lo) and odd (hi) 16-bit halves of each 32-bit lane, as exact
       int16 values, packed: x = a0 b0 a1 b1 ..., y = a4 b4 ... */
    static inline __m128i xs_even16(__m128i x, __m128i y) {
        return _mm_packs_epi32(_mm_srai_epi32(_mm_slli_epi32(x, 16), 16),
                               _mm_srai_epi32(_mm_slli_epi32(y, 16), 16));
    }
    static inline __m128i xs_odd16(__m128i x, __m128i y) {
        return _mm_packs_epi32(_mm_srai_epi32(x, 16), _mm_srai_epi32(y, 16));
    }
    static inline __m128i xs_even8(__m128i x, __m128i y) {
        return _mm_packs_epi16(_mm_srai_epi16(_mm_slli_epi16(x, 8), 8),
                               _mm_srai_epi16(_mm_slli_epi16(y, 8), 8));
    }
    static inline __m128i xs_odd8(__m128i x, __m128i y) {
        return _mm_packs_epi16(_mm_srai_epi16(x, 8), _mm_srai_epi16(y, 8));
    }
    #endif

    /* Interleave k rows of n elements (isz bytes each; row q at rows[q], its
       elements ss bytes apart) into one contiguous stretch:
       d[j*k + q] = rows[q][j]. TPU sub-tiles such as (2,1) for 16-bit and
       (4,1) for 8-bit types store rows this way. */
    static void xs_zip(char* d, const char* const* rows, int64_t ss, int64_t n, int k,
                       int64_t isz, int stream) {
        int64_t j = 0;
        int q;
    #ifdef XS_SSE2
        int nt = stream && (((uintptr_t)d) & 63) == 0 && (n * k * isz) % 64 == 0;
        if (ss == isz && isz == 2 && k == 2) {
            const char *r0 = rows[0], *r1 = rows[1];
            for (; j + 8 <= n; j += 8) {
                __m128i a = _mm_loadu_si128((const __m128i*)(r0 + 2 * j));
                __m128i b = _mm_loadu_si128((const __m128i*)(r1 + 2 * j));
                xs_put16(d + 4 * j, _mm_unpacklo_epi16(a, b), nt);
                xs_put16(d + 4 * j + 16, _mm_unpackhi_epi16(a, b), nt);
            }
        } else if (ss == isz && isz == 1 && k == 4) {
            const char *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
            for (; j + 16 <= n; j += 16) {
                __m128i a = _mm_loadu_si128((const __m128i*)(r0 + j));
                __m128i b = _mm_loadu_si128((const __m128i*)(r1 + j));
                __m128i c = _mm_loadu_si128((const __m128i*)(r2 + j));
                __m128i e = _mm_loadu_si128((const __m128i*)(r3 + j));
                __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
                __m128i ce0 = _mm_unpacklo_epi8(c, e), ce1 = _mm_unpackhi_epi8(c, e);
                xs_put16(d + 4 * j, _mm_unpacklo_epi16(ab0, ce0), nt);
                xs_put16(d + 4 * j + 16, _mm_unpackhi_epi16(ab0, ce0), nt);
                xs_put16(d + 4 * j + 32, _mm_unpacklo_epi16(ab1, ce1), nt);
                xs_put16(d + 4 * j + 48, _mm_unpackhi_epi16(ab1, ce1), nt);
            }
        } else if (ss == isz && isz == 1 && k == 2) {
            const char *r0 = rows[0], *r1 = rows[1];
            for (; j + 16 <= n; j += 16) {
                __m128i a = _mm_loadu_si128((const __m128i*)(r0 + j));
                __m128i b = _mm_loadu_si128((const __m128i*)(r1 + j));
                xs_put16(d + 2 * j, _mm_unpacklo_epi8(a, b), nt);
                xs_put16(d + 2 * j + 16, _mm_unpackhi_epi8(a, b), nt);
            }
        } else if (ss == isz && isz == 4 && k == 2) {
            const char *r0 = rows[0], *r1 = rows[1];
            for (; j + 4 <= n; j += 4) {
                __m128i a = _mm_loadu_si128((const __m128i*)(r0 + 4 * j));
                __m128i b = _mm_loadu_si128((const __m128i*)(r1 + 4 * j));
                xs_put16(d + 8 * j, _mm_unpacklo_epi32(a, b), nt);
                xs_put16(d + 8 * j + 16, _mm_unpackhi_epi32(a, b), nt);
            }
        }
    #else
        (void)stream;
    #endif
        for (; j < n; j++)
            for (q = 0; q < k; q++)
                memcpy(d + (j * k + q) * isz, rows[q] + j * ss, (size_t)isz);
    }

    /* The inverse of xs_zip: rows[q][j] = s[j*k + q] (rows' elements ds
       bytes apart), plain stores. */
    static void xs_unzip_direct(char* const* rows, int64_t ds, const char* s, int64_t n,
                                int k, int64_t isz) {
        int64_t j = 0;
        int q;
    #ifdef XS_SSE2
        const int nt = 0;
        if (ds == isz && isz == 2 && k == 2) {
            char *r0 = rows[0], *r1 = rows[1];
            for (; j + 8 <= n; j += 8) {
                __m128i x = _mm_loadu_si128((const __m128i*)(s + 4 * j));
                __m128i y = _mm_loadu_si128((const __m128i*)(s + 4 * j + 16));
                xs_put16(r0 + 2 * j, xs_even16(x, y), nt);
                xs_put16(r1 + 2 * j, xs_odd16(x, y), nt);
            }
        } else if (ds == isz && isz == 1 && k == 4) {
            char *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
            for (; j + 16 <= n; j += 16) {
                __m128i x0 = _mm_loadu_si128((const __m128i*)(s + 4 * j));
                __m128i x1 = _mm_loadu_si128((const __m128i*)(s + 4 * j + 16));
                __m128i x2 = _mm_loadu_si128((const __m128i*)(s + 4 * j + 32));
                __m128i x3 = _mm_loadu_si128((const __m128i*)(s + 4 * j + 48));
                /* four rounds of byte unpacks undo a 4-way interleave of 64 bytes */
                int q;
                for (q = 0; q < 4; q++) {
                    __m128i y0 = _mm_unpacklo_epi8(x0, x2), y1 = _mm_unpackhi_epi8(x0, x2);
                    __m128i y2 = _mm_unpacklo_epi8(x1, x3), y3 = _mm_unpackhi_epi8(x1, x3);
                    x0 = y0; x1 = y1; x2 = y2; x3 = y3;
                }
                xs_put16(r0 + j, x0, nt);
                xs_put16(r1 + j, x1, nt);
                xs_put16(r2 + j, x2, nt);
                xs_put16(r3 + j, x3, nt);
            }
        } else if (ds == isz && isz == 1 && k == 2) {
            char *r0 = rows[0], *r1 = rows[1];
            for (; j + 16 <= n; j += 16) {
                __m128i x = _mm_loadu_si128((const __m128i*)(s + 2 * j));
                __m128i y = _mm_loadu_si128((const __m128i*)(s + 2 * j + 16));
                xs_put16(r0 + j, xs_even8(x, y), nt);
                xs_put16(r1 + j, xs_odd8(x, y), nt);
            }
        } else if (ds == isz && isz == 4 && k == 2) {
            char *r0 = rows[0], *r1 = rows[1];
            for (; j + 4 <= n; j += 4) {
                __m128 x = _mm_castsi128_ps(_mm_loadu_si128((const __m128i*)(s + 8 * j)));
                __m128 y = _mm_castsi128_ps(_mm_loadu_si128((const __m128i*)(s + 8 * j + 16)));
                xs_put16(r0 + 4 * j, _mm_castps_si128(_mm_shuffle_ps(x, y, 0x88)), nt);
                xs_put16(r1 + 4 * j, _mm_castps_si128(_mm_shuffle_ps(x, y, 0xDD)), nt);
            }
        }
    #endif
        for (; j < n; j++)
            for (q = 0; q < k; q++)
                memcpy(rows[q] + j * ds, s + (j * k + q) * isz, (size_t)isz);
    }

    /* xs_unzip_direct; with stream (and contiguous rows) through a small
       staging buffer, so each row is written by whole-line streaming stores
       (streaming stores into k rows by turns measured 2-4x slower). */
    #define XS_STAGE 512
    static void xs_unzip(char* const* rows, int64_t ds, const char* s, int64_t n, int k,
                         int64_t isz, int stream) {
        char stage[4 * XS_STAGE];
        char* st[4];
        int64_t j, m, chunk = XS_STAGE / isz;
        int q;
        if (!stream || ds != isz || k > 4 || chunk < 1) {
            xs_unzip_direct(rows, ds, s, n, k, isz);
            return;
        }
        for (q = 0; q < k; q++)
            st[q] = stage + q * XS_STAGE;
        for (j = 0; j < n; j += chunk) {
            m = n - j < chunk ? n - j : chunk;
            xs_unzip_direct(st, isz, s + j * k * isz, m, k, isz);
            for (q = 0; q < k; q++)
                xs_copy(rows[q] + j * isz, st[q], m * isz, 1);
        }
    }

    /* Transpose a block into a buffer whose rows are ost bytes apart:
       element i of buffer row j (at buf + j*ost + i*isz) = rows[i][j] for
       i < nr, j < nc (row i's elements ss bytes apart). SIMD in-register
       transposes of 8x8 (4-byte, AVX2 when the processor has it), 4x4
       (4-byte), 2x2 (8-byte), 8x8 (2-byte) and 16x16 (1-byte) sub-blocks
       when the rows are contiguous; element by element for what is left. */
    #define XS_TSCALAR(T) do { \\
        xs_prefetch_rows(pf, (i0 * npf) / (nr ? nr : 1), npf, pfbytes); \\
        for (j = 0; j < nc; j++) \\
            for (i = i0; i < nr; i++) \\
                memcpy(buf + j * ost + i * (int64_t)sizeof(T), rows[i] + j * ss, sizeof(T)); \\
    } while (0)
    #define XS_TCOLS(T, j0) do { \\
        for (j = (j0); j < nc; j++) \\
            for (i = i0; i < i0 + step; i++) \\
                memcpy(buf + j * ost + i * (int64_t)sizeof(T), rows[i] + j * ss, sizeof(T)); \\
    } while (0)
    /* Prefetch the first `bytes` of rows pf[from..to). */
    static inline void xs_prefetch_rows(const char* const* pf, int64_t from, int64_t to,
                                        int64_t bytes) {
        int64_t i, c;
        for (i = from; i < to; i++) {
            for (c = 0; c < bytes; c += 64)
                xs_prefetch(pf[i] + c);
            if (bytes > 0)
                xs_prefetch(pf[i] + bytes - 1);
        }
    }
    /* ... and while doing so, prefetch the first pfbytes of the rows
       pf[0..npf) (the next block), a share per group of rows. */
    #define XS_PF_GROUP() do { \\
        if (npf == nr) \\
            xs_prefetch_rows(pf, i0, i0 + step, pfbytes); \\
        else if (npf) \\
            xs_prefetch_rows(pf, (i0 * npf) / nr, ((i0 + step) * npf) / nr, pfbytes); \\
    } while (0)
    #if defined(XS_SSE2) && defined(__GNUC__) && defined(__x86_64__)
    #include <immintrin.h>
    #define XS_AVX2 1
    /* 1 when the processor runs AVX2 (asked once; the kernels that use it
       are compiled for it separately, the rest of the module is not). */
    static int xs_avx2_state = -1;
    static int xs_has_avx2(void) {
        if (xs_avx2_state < 0)
            xs_avx2_state = __builtin_cpu_supports("avx2") ? 1 : 0;
        return xs_avx2_state;
    }
    /* Rows i0 .. i0+7 of a 4-byte block, columns 0 .. nc8-1 (nc8 a multiple
       of 8), into buf as xs_transpose does: 8x8 sub-blocks, each as two
       8-row by 4-column halves (row q's and row q+4's four elements share
       a 256-bit register, so in-lane shuffles finish the transpose). */
    __attribute__((target("avx2")))
    static void xs_t8x8_f32(char* buf, int64_t ost, const char* const* rows, int64_t i0,
                            int64_t nc8) {
        const char *r0 = rows[i0], *r1 = rows[i0 + 1], *r2 = rows[i0 + 2], *r3 = rows[i0 + 3];
        const char *r4 = rows[i0 + 4], *r5 = rows[i0 + 5], *r6 = rows[i0 + 6], *r7 = rows[i0 + 7];
        int64_t j, h;
        for (j = 0; j < nc8; j += 8) {
            for (h = 0; h < 8; h += 4) {
                int64_t c = 4 * (j + h);
                __m256 a = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps((const float*)(r0 + c))),
                                                _mm_loadu_ps((const float*)(r4 + c)), 1);
                __m256 b = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps((const float*)(r1 + c))),
                                                _mm_loadu_ps((const float*)(r5 + c)), 1);
                __m256 e = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps((const float*)(r2 + c))),
                                                _mm_loadu_ps((const float*)(r6 + c)), 1);
                __m256 f = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps((const float*)(r3 + c))),
                                                _mm_loadu_ps((const float*)(r7 + c)), 1);
                /* lane k of t0: (row 0, col 0) (row 1, col 0) (row 0, col 1) (row 1, col 1), rows +4k */
                __m256 t0 = _mm256_unpacklo_ps(a, b), t1 = _mm256_unpackhi_ps(a, b);
                __m256 t2 = _mm256_unpacklo_ps(e, f), t3 = _mm256_unpackhi_ps(e, f);
                char* o = buf + (j + h) * ost + i0 * 4;
                _mm256_storeu_ps((float*)o, _mm256_shuffle_ps(t0, t2, 0x44));
                _mm256_storeu_ps((float*)(o + ost), _mm256_shuffle_ps(t0, t2, 0xEE));
                _mm256_storeu_ps((float*)(o + 2 * ost), _mm256_shuffle_ps(t1, t3, 0x44));
                _mm256_storeu_ps((float*)(o + 3 * ost), _mm256_shuffle_ps(t1, t3, 0xEE));
            }
        }
    }
    #endif
    static void xs_transpose(char* buf, int64_t ost, const char* const* rows, int64_t ss,
                             int64_t nr, int64_t nc, int64_t isz, const char* const* pf,
                             int64_t npf, int64_t pfbytes) {
        int64_t i, j, i0 = 0, step;
    #ifdef XS_SSE2
        if (ss == isz && isz == 4) {
    #ifdef XS_AVX2
            if (nc >= 8 && xs_has_avx2()) {
                step = 8;
                for (; i0 + 8 <= nr; i0 += 8) {
                    XS_PF_GROUP();
                    xs_t8x8_f32(buf, ost, rows, i0, nc & ~(int64_t)7);
                    XS_TCOLS(uint32_t, nc & ~(int64_t)7);
                }
            }
    #endif
            step = 4;
            for (; i0 + 4 <= nr; i0 += 4) {
                XS_PF_GROUP();
                const char *r0 = rows[i0], *r1 = rows[i0 + 1], *r2 = rows[i0 + 2], *r3 = rows[i0 + 3];
                for (j = 0; j + 4 <= nc; j += 4) {
                    __m128 a = _mm_loadu_ps((const float*)(r0 + 4 * j));
                    __m128 b = _mm_loadu_ps((const float*)(r1 + 4 * j));
                    __m128 c = _mm_loadu_ps((const float*)(r2 + 4 * j));
                    __m128 e = _mm_loadu_ps((const float*)(r3 + 4 * j));
                    _MM_TRANSPOSE4_PS(a, b, c, e);
                    _mm_storeu_ps((float*)(buf + j * ost + i0 * 4), a);
                    _mm_storeu_ps((float*)(buf + (j + 1) * ost + i0 * 4), b);
                    _mm_storeu_ps((float*)(buf + (j + 2) * ost + i0 * 4), c);
                    _mm_storeu_ps((float*)(buf + (j + 3) * ost + i0 * 4), e);
                }
                XS_TCOLS(uint32_t, j);
            }
            XS_TSCALAR(uint32_t);
            return;
        }
        if (ss == isz && isz == 8) {
            step = 2;
            for (; i0 + 2 <= nr; i0 += 2) {
                XS_PF_GROUP();
                const char *r0 = rows[i0], *r1 = rows[i0 + 1];
                for (j = 0; j + 2 <= nc; j += 2) {
                    __m128d a = _mm_loadu_pd((const double*)(r0 + 8 * j));
                    __m128d b = _mm_loadu_pd((const double*)(r1 + 8 * j));
                    _mm_storeu_pd((double*)(buf + j * ost + i0 * 8), _mm_unpacklo_pd(a, b));
                    _mm_storeu_pd((double*)(buf + (j + 1) * ost + i0 * 8), _mm_unpackhi_pd(a, b));
                }
                XS_TCOLS(uint64_t, j);
            }
            XS_TSCALAR(uint64_t);
            return;
        }
        if (ss == isz && isz == 2) {
            step = 8;
            for (; i0 + 8 <= nr; i0 += 8) {
                XS_PF_GROUP();
                for (j = 0; j + 8 <= nc; j += 8) {
                    __m128i r[8], t[8], u[8];
                    int q;
                    for (q = 0; q < 8; q++)
                        r[q] = _mm_loadu_si128((const __m128i*)(rows[i0 + q] + 2 * j));
                    for (q = 0; q < 4; q++) {
                        t[2 * q] = _mm_unpacklo_epi16(r[2 * q], r[2 * q + 1]);
                        t[2 * q + 1] = _mm_unpackhi_epi16(r[2 * q], r[2 * q + 1]);
                    }
                    /* t[2q]: columns 0-3 of rows 2q, 2q+1; t[2q+1]: columns 4-7 */
                    u[0] = _mm_unpacklo_epi32(t[0], t[2]);
                    u[1] = _mm_unpackhi_epi32(t[0], t[2]);
                    u[2] = _mm_unpacklo_epi32(t[1], t[3]);
                    u[3] = _mm_unpackhi_epi32(t[1], t[3]);
                    u[4] = _mm_unpacklo_epi32(t[4], t[6]);
                    u[5] = _mm_unpackhi_epi32(t[4], t[6]);
                    u[6] = _mm_unpacklo_epi32(t[5], t[7]);
                    u[7] = _mm_unpackhi_epi32(t[5], t[7]);
                    /* u[m] (m < 4): columns 2m, 2m+1 of rows 0-3; u[4+m]: of rows 4-7 */
                    for (q = 0; q < 4; q++) {
                        _mm_storeu_si128((__m128i*)(buf + (j + 2 * q) * ost + i0 * 2),
                                         _mm_unpacklo_epi64(u[q], u[4 + q]));
                        _mm_storeu_si128((__m128i*)(buf + (j + 2 * q + 1) * ost + i0 * 2),
                                         _mm_unpackhi_epi64(u[q], u[4 + q]));
                    }
                }
                XS_TCOLS(uint16_t, j);
            }
            XS_TSCALAR(uint16_t);
            return;
        }
        if (ss == isz && isz == 1) {
            step = 16;
            for (; i0 + 16 <= nr; i0 += 16) {
                XS_PF_GROUP();
                for (j = 0; j + 16 <= nc; j += 16) {
                    __m128i r[16], a[16], b[16], c[16];
                    int q, p;
                    for (q = 0; q < 16; q++)
                        r[q] = _mm_loadu_si128((const __m128i*)(rows[i0 + q] + j));
                    /* a[2p]: columns 0-7 of rows 2p, 2p+1; a[2p+1]: columns 8-15 */
                    for (p = 0; p < 8; p++) {
                        a[2 * p] = _mm_unpacklo_epi8(r[2 * p], r[2 * p + 1]);
                        a[2 * p + 1] = _mm_unpackhi_epi8(r[2 * p], r[2 * p + 1]);
                    }
                    /* b[4p+c]: columns 4c..4c+3 of rows 4p..4p+3 */
                    for (p = 0; p < 4; p++) {
                        b[4 * p] = _mm_unpacklo_epi16(a[4 * p], a[4 * p + 2]);
                        b[4 * p + 1] = _mm_unpackhi_epi16(a[4 * p], a[4 * p + 2]);
                        b[4 * p + 2] = _mm_unpacklo_epi16(a[4 * p + 1], a[4 * p + 3]);
                        b[4 * p + 3] = _mm_unpackhi_epi16(a[4 * p + 1], a[4 * p + 3]);
                    }
                    /* c[8p+m]: columns 2m, 2m+1 of rows 8p..8p+7 */
                    for (p = 0; p < 2; p++)
                        for (q = 0; q < 4; q++) {
                            c[8 * p + 2 * q] = _mm_unpacklo_epi32(b[8 * p + q], b[8 * p + 4 + q]);
                            c[8 * p + 2 * q + 1] = _mm_unpackhi_epi32(b[8 * p + q], b[8 * p + 4 + q]);
                        }
                    for (q = 0; q < 8; q++) {
                        _mm_storeu_si128((__m128i*)(buf + (j + 2 * q) * ost + i0),
                                         _mm_unpacklo_epi64(c[q], c[8 + q]));
                        _mm_storeu_si128((__m128i*)(buf + (j + 2 * q + 1) * ost + i0),
                                         _mm_unpackhi_epi64(c[q], c[8 + q]));
                    }
                }
                XS_TCOLS(uint8_t, j);
            }
            XS_TSCALAR(uint8_t);
            return;
        }
    #endif
        (void)step;
        if (isz == 4) XS_TSCALAR(uint32_t);
        else if (isz == 2) XS_TSCALAR(uint16_t);
        else if (isz == 1) XS_TSCALAR(uint8_t);
        else if (isz == 8) XS_TSCALAR(uint64_t);
        else {
            xs_prefetch_rows(pf, 0, npf, pfbytes);
            for (j = 0; j < nc; j++)
                for (i = 0; i < nr; i++)
                    memcpy(buf + j * ost + i * isz, rows[i] + j * ss, (size_t)isz);
        }
    }

    /* A dimension's share of a separable side's byte offset:
       tab ? tab[i] * scale : i * scale. */
    typedef struct { const int64_t* tab; int64_t scale; } xs_dimoff;
    static inline int64_t xs_off(xs_dimoff o, int64_t i) {
        return o.tab ? o.tab[i] * o.scale : i * o.scale;
    }
    static inline int64_t xs_min3(int64_t a, int64_t b, int64_t c) {
        if (b < a) a = b;
        return c < a ? c : a;
    }

    /* Copy n bytes within the cache (no streaming): 16-byte pieces while
       they last, the common run lengths unrolled, no library call. */
    static inline void xs_copy_small(char* d, const char* s, int64_t n) {
    #ifdef XS_SSE2
        int64_t k = 0;
        for (; k + 64 <= n; k += 64) {
            __m128i a = _mm_loadu_si128((const __m128i*)(s + k));
            __m128i b = _mm_loadu_si128((const __m128i*)(s + k + 16));
            __m128i c = _mm_loadu_si128((const __m128i*)(s + k + 32));
            __m128i e = _mm_loadu_si128((const __m128i*)(s + k + 48));
            _mm_storeu_si128((__m128i*)(d + k), a);
            _mm_storeu_si128((__m128i*)(d + k + 16), b);
            _mm_storeu_si128((__m128i*)(d + k + 32), c);
            _mm_storeu_si128((__m128i*)(d + k + 48), e);
        }
        for (; k + 16 <= n; k += 16)
            _mm_storeu_si128((__m128i*)(d + k), _mm_loadu_si128((const __m128i*)(s + k)));
        if (k < n)
            memcpy(d + k, s + k, (size_t)(n - k));
    #else
        memcpy(d, s, (size_t)n);
    #endif
    }

    /* The run copy's plain case in one loop: nb rows, both sides contiguous
       along d; row r's element p is at sbase + rs[r] + sD(p) and goes to
       dbase + rd[r] + dD(p). Runs end at multiples of either side's window
       (wd, ws); for each run, every row. */
    static void xs_band_runs(char* dbase, const int64_t* rd, xs_dimoff dD, int64_t wd,
                             const char* sbase, const int64_t* rs, xs_dimoff sD, int64_t ws,
                             int nb, int64_t n, int64_t isz, int stream) {
        int64_t p = 0, cut_d = 0, cut_s = 0, ln, L;
        int r;
        while (p < n) {
            char* d;
            const char* s;
            while (cut_d <= p) cut_d += wd;
            while (cut_s <= p) cut_s += ws;
            ln = xs_min3(n, cut_d, cut_s) - p;
            L = ln * isz;
            d = dbase + xs_off(dD, p);
            s = sbase + xs_off(sD, p);
            if (stream && L >= 64) {
                for (r = 0; r < nb; r++)
                    xs_copy(d + rd[r], s + rs[r], L, 1);
            } else {
                for (r = 0; r < nb; r++)
                    xs_copy_small(d + rd[r], s + rs[r], L);
            }
            p += ln;
        }
    }

    /* The transposing copy of one plane: element (a, b) goes from
       sbase + sA(a) + sB(b) to dbase + dA(a) + dB(b). The source runs along
       a (contiguous for wsa elements from multiples of wsa, ssa bytes
       apart), the destination along b (wdb, sdb). Blocks of up to R (along
       b) x C (along a) elements, cut at both windows, go through buf: the
       block's source rows are transposed into it (SIMD), then each of its
       rows is written as one contiguous run. Blocks go along a first, so
       each source row continues where the last block left it, and the next
       block's source lines are prefetched while this one is transposed.
       Only the rows b_begin <= b < b_end are copied (a share for a thread).
       stream: bit 0, streaming stores; bit 1, the carry described below.
       The first band of rows is cut short where the destination rows reach
       a cache line, so streaming stores write whole lines. */
    static void xs_transpose_plane(char* dbase, xs_dimoff dA, xs_dimoff dB,
                                   const char* sbase, xs_dimoff sA, xs_dimoff sB,
                                   int64_t na, int64_t wsa, int64_t ssa,
                                   int64_t nbd, int64_t wdb, int64_t sdb,
                                   int64_t isz, int64_t R, int64_t C, int stream,
                                   int64_t b_begin, int64_t b_end, char* buf) {
        const char* rows_a[128];
        const char* rows_b[128];
        const char** cur = rows_a;
        const char** nxt = rows_b;
        int64_t a0, b0, la, lb, a1, b1, la1 = 0, lb1 = 0, i, j, first, npf;
        /* buffer rows a line longer than the block's rows, so that the
           transpose's column of stores does not fall into a few cache sets */
        const int64_t ost = R * isz + 64;
        int more, pf = ssa == isz, st = stream && sdb == isz;
        /* carry: when destination rows are not all line aligned (row
           lengths that are not a multiple of 64 bytes), a row's piece of one
           band ends inside a line that the next band's piece completes. Then
           the partial last line of each piece is kept here (64 bytes per row
           along a) and written, with the next band's first bytes, as one
           whole streaming line, instead of twice with plain stores that read
           the line from memory first. */
        char* carry = NULL;
        int64_t prev_L = 0, next_L = 0, nb1;
        if (b_begin >= b_end || na <= 0)
            return;
        if (nbd > b_end)
            nbd = b_end;
        if (st && (stream & 2) && R * isz >= 64) {
            for (i = 0; i < na; i++)
                if (((uintptr_t)(dbase + xs_off(dA, i) + xs_off(dB, b_begin))) & 63)
                    break;
            if (i < na)
                carry = (char*)malloc((size_t)na * 64);
        }
        /* the first band ends where the destination rows are line aligned */
        first = R;
        if (st) {
            int64_t mis = (int64_t)(((uintptr_t)(dbase + xs_off(dA, 0) + xs_off(dB, b_begin))) & 63);
            if (mis && mis % isz == 0 && (64 - mis) / isz < R)
                first = (64 - mis) / isz;
        }
        a0 = 0;
        b0 = b_begin;
        la = xs_min3(C, na, wsa);
        lb = xs_min3(first, nbd - b0, wdb - b0 % wdb);
        for (i = 0; i < lb; i++)
            cur[i] = sbase + xs_off(sB, b0 + i) + xs_off(sA, a0);
        for (;;) {
            /* the next block: along a, then the next band of rows along b */
            a1 = a0 + la;
            b1 = b0;
            if (a1 >= na) {
                a1 = 0;
                b1 = b0 + lb;
            }
            more = b1 < nbd;
            if (more) {
                la1 = xs_min3(C, na - a1, wsa - a1 % wsa);
                lb1 = b1 == b0 ? lb : xs_min3(R, nbd - b1, wdb - b1 % wdb);
                for (i = 0; i < lb1; i++)
                    nxt[i] = sbase + xs_off(sB, b1 + i) + xs_off(sA, a1);
            }
            /* the next block's source lines are prefetched a share at a
               time, half while this block is transposed and half while its
               rows are written, so that memory stays busy throughout */
            npf = more && pf ? lb1 : 0;
            xs_transpose(buf, ost, cur, ssa, lb, la, isz, nxt, npf / 2, la1 * isz);
            {
                char* drow = dbase + xs_off(dB, b0);
                const char* bp = buf;
                int64_t L = lb * isz, pdone = npf / 2, pto;
                int nt = st && L >= 64, straddle = 0, defer = 0;
                if (carry && L >= 64) {
                    /* the bands before and after this one, when they continue
                       the destination rows exactly (pieces of 64 bytes or
                       more on both sides of a line, as xs_row_run wants) */
                    if (a0 == 0) {
                        nb1 = b0 + lb;
                        next_L = 0;
                        if (nb1 < nbd && xs_off(dB, nb1) == xs_off(dB, b0) + L)
                            next_L = xs_min3(R, nbd - nb1, wdb - nb1 % wdb) * isz;
                    }
                    straddle = prev_L >= 64;
                    defer = next_L >= 64;
                }
                for (j = 0; j < la; j++, bp += ost) {
                    char* d = drow + xs_off(dA, a0 + j);
                    if (straddle || defer) {
                        char* cy = carry + (a0 + j) * 64;
                        int64_t tail = (int64_t)(((uintptr_t)(d + L)) & 63);
                        xs_row_run(d, bp, L, straddle ? cy + 64 : NULL, defer);
                        if (defer && tail)
                            memcpy(cy + 64 - tail, bp + L - tail, (size_t)tail);
                    } else if (sdb == isz)
                        xs_copy(d, bp, L, nt);
                    else
                        for (i = 0; i < lb; i++)
                            memcpy(d + i * sdb, bp + i * isz, (size_t)isz);
                    pto = npf / 2 + ((npf - npf / 2) * (j + 1)) / la;
                    xs_prefetch_rows(nxt, pdone, pto, la1 * isz);
                    pdone = pto;
                }
            }
            if (!more)
                break;
            if (b1 != b0)   /* a new band: its pieces complete this band's deferred lines */
                prev_L = carry && lb * isz >= 64 && next_L >= 64 ? lb * isz : 0;
            a0 = a1; b0 = b1; la = la1; lb = lb1;
            { const char** t = cur; cur = nxt; nxt = t; }
        }
        free(carry);
    }

    /* Two threads for one kernel: job(arg1) runs in a new thread while the
       caller runs job(arg0); returns when both are done. Without POSIX
       threads, or when the thread cannot be started, both run here. */
    #if defined(__unix__) || defined(__APPLE__)
    #include <pthread.h>
    #define XS_HAVE_THREADS 1
    #else
    #define XS_HAVE_THREADS 0
    #endif
    typedef void (*xs_job_fn)(void*);
    typedef struct { xs_job_fn fn; void* arg; } xs_thread_start;
    #if XS_HAVE_THREADS
    static void* xs_thread_main(void* p) {
        xs_thread_start* t = (xs_thread_start*)p;
        t->fn(t->arg);
        return NULL;
    }
    #endif
    static void xs_run2(xs_job_fn fn, void* arg0, void* arg1) {
    #if XS_HAVE_THREADS
        pthread_t th;
        xs_thread_start t;
        t.fn = fn;
        t.arg = arg1;
        if (pthread_create(&th, NULL, xs_thread_main, &t) == 0) {
            fn(arg0);
            pthread_join(th, NULL);
            return;
        }
    #endif
        fn(arg0);
        fn(arg1);
    }

    /* xs_transpose_plane's arguments, for a thread. */
    typedef struct {
        char* dbase; xs_dimoff dA, dB;
        const char* sbase; xs_dimoff sA, sB;
        int64_t na, wsa, ssa, nbd, wdb, sdb, isz, R, C;
        int stream;
        int64_t b_begin, b_end;
    } xs_plane_job;
    static void xs_plane_job_run(void* p) {
        xs_plane_job* j = (xs_plane_job*)p;
        char store[XS_BLOCK_BUF_BYTES + 64];
        char* buf = store + ((64 - ((uintptr_t)store & 63)) & 63);
        xs_transpose_plane(j->dbase, j->dA, j->dB, j->sbase, j->sA, j->sB, j->na, j->wsa,
                           j->ssa, j->nbd, j->wdb, j->sdb, j->isz, j->R, j->C, j->stream,
                           j->b_begin, j->b_end, buf);
        if (j->stream)
            xs_store_fence();
    }
    /* A plane on two threads: the rows along b split in two halves (at a
       multiple of R), one per thread. */
    static void xs_transpose_plane2(char* dbase, xs_dimoff dA, xs_dimoff dB,
                                    const char* sbase, xs_dimoff sA, xs_dimoff sB,
                                    int64_t na, int64_t wsa, int64_t ssa,
                                    int64_t nbd, int64_t wdb, int64_t sdb,
                                    int64_t isz, int64_t R, int64_t C, int stream) {
        xs_plane_job j[2];
        int64_t mid = (nbd / 2) / R * R;
        j[0].dbase = dbase; j[0].dA = dA; j[0].dB = dB;
        j[0].sbase = sbase; j[0].sA = sA; j[0].sB = sB;
        j[0].na = na; j[0].wsa = wsa; j[0].ssa = ssa; j[0].nbd = nbd; j[0].wdb = wdb;
        j[0].sdb = sdb; j[0].isz = isz; j[0].R = R; j[0].C = C; j[0].stream = stream;
        j[1] = j[0];
        j[0].b_begin = 0; j[0].b_end = mid;
        j[1].b_begin = mid; j[1].b_end = nbd;
        xs_run2(xs_plane_job_run, &j[0], &j[1]);
    }
    """
    void xs_prefetch(const char* p) noexcept nogil
    void xs_prefetch_span(const char* p, int64_t n) noexcept nogil
    void xs_copy(char* d, const char* s, int64_t n, int stream) noexcept nogil
    void xs_store_fence() noexcept nogil
    void xs_row_run(char* d, const char* s, int64_t L, const char* prev_end,
                    int defer) noexcept nogil
    void xs_zip(char* d, const char** rows, int64_t ss, int64_t n, int k,
                int64_t isz, int stream) noexcept nogil
    void xs_unzip(char** rows, int64_t ds, const char* s, int64_t n, int k,
                  int64_t isz, int stream) noexcept nogil
    void xs_unzip_direct(char** rows, int64_t ds, const char* s, int64_t n, int k,
                         int64_t isz) noexcept nogil
    void xs_transpose(char* buf, int64_t ost, const char** rows, int64_t ss, int64_t nr,
                      int64_t nc, int64_t isz, const char** pf, int64_t npf,
                      int64_t pfbytes) noexcept nogil
    ctypedef struct xs_dimoff:
        const int64_t* tab
        int64_t scale
    void xs_band_runs(char* dbase, const int64_t* rd, xs_dimoff dD, int64_t wd,
                      const char* sbase, const int64_t* rs, xs_dimoff sD, int64_t ws,
                      int nb, int64_t n, int64_t isz, int stream) noexcept nogil
    void xs_transpose_plane2(char* dbase, xs_dimoff dA, xs_dimoff dB,
                             const char* sbase, xs_dimoff sA, xs_dimoff sB,
                             int64_t na, int64_t wsa, int64_t ssa,
                             int64_t nbd, int64_t wdb, int64_t sdb,
                             int64_t isz, int64_t R, int64_t C, int stream) noexcept nogil
    void xs_transpose_plane(char* dbase, xs_dimoff dA, xs_dimoff dB,
                            const char* sbase, xs_dimoff sA, xs_dimoff sB,
                            int64_t na, int64_t wsa, int64_t ssa,
                            int64_t nbd, int64_t wdb, int64_t sdb,
                            int64_t isz, int64_t R, int64_t C, int stream,
                            int64_t b_begin, int64_t b_end, char* buf) noexcept nogil


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
                    if ln * 4 * isz <= ZIP_BYTES:
                        k = _group(dst, dims, rank, idx, e, r, e1, sd, isz, &od)
                        if k > 1:
                            for q in range(k):
                                idx[e] = r + q
                                srcs[q] = src.base + side_offset(src, idx, rank)
                            if stream:
                                _zip(stage, srcs, ss, ln, k, isz)
                                xs_copy(dst.base + od, stage, ln * k * isz, 1)
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
    read-modify-write in memory (unpack measured 1.24-1.31x the aligned time
    that way, 1.10x with the lines completed from the previous run).
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


cdef inline void _block_rows(const Side* s, int64_t* idx, int rank, int a, int b,
                             int64_t a0, int64_t b0, int64_t n,
                             const char** rows) noexcept nogil:
    """rows[i] = address of element (a = a0, b = b0 + i) in s, for i < n."""
    cdef int64_t i, base
    idx[a] = a0
    if side_separable(s):
        base = sep_base(s, idx, rank, b, -1)
        for i in range(n):
            rows[i] = s.base + base + dim_offset(s, b, b0 + i)
    else:
        for i in range(n):
            idx[b] = b0 + i
            rows[i] = s.base + side_offset(s, idx, rank)


cdef void copy_transpose_general(const Side* dst, const Side* src, const int64_t* dims,
                                 int rank, int a, int b, int64_t R, int64_t C,
                                 bint stream) noexcept nogil:
    """copy_transpose for sides that are not separable (tiles that combine
    dimensions with '*'): the same blocks, offsets by program per block row."""
    cdef int64_t idx[MAX_RANK]
    cdef const char* rows_a[MAX_EDGE]
    cdef const char* rows_b[MAX_EDGE]
    cdef const char** cur = rows_a
    cdef const char** nxt = rows_b
    cdef const char** swap
    cdef double buf_store[PLANE_BUF_WORDS + 8]
    cdef char* buf = _line_align(<char*>buf_store)
    cdef int64_t wsa, ssa, wdb, sdb, isz = dst.itemsize
    cdef int64_t na = dims[a], nbd = dims[b]
    cdef int64_t a0, b0, la, lb, a1, b1, la1, lb1, i, j, c, dbase
    cdef bint more, pf, st
    cdef int k
    la1 = lb1 = dbase = 0
    for k in range(rank):
        idx[k] = 0
    side_window(src, a, &wsa, &ssa)
    side_window(dst, b, &wdb, &sdb)
    pf = ssa == isz
    st = stream and sdb == isz
    while True:
        a0 = 0
        b0 = 0
        la = _min3(C, na, wsa)
        lb = _min3(R, nbd, wdb)
        _block_rows(src, idx, rank, a, b, a0, b0, lb, cur)
        while True:
            # the next block: along a, then the next band of rows along b
            a1 = a0 + la
            b1 = b0
            if a1 >= na:
                a1 = 0
                b1 = b0 + lb
            more = b1 < nbd
            if more:
                la1 = _min3(C, na - a1, wsa - a1 % wsa)
                lb1 = _min3(R, nbd - b1, wdb - b1 % wdb)
                _block_rows(src, idx, rank, a, b, a1, b1, lb1, nxt)
            # transpose this block while the next one's source lines arrive
            xs_transpose(buf, lb * isz, cur, ssa, lb, la, isz, nxt, lb1 if more and pf else 0,
                         la1 * isz)
            # write the block's rows: row j is (a = a0 + j), b0 .. b0 + lb - 1
            idx[b] = b0
            if side_separable(dst):
                dbase = sep_base(dst, idx, rank, a, -1)
            for j in range(la):
                if side_separable(dst):
                    c = dbase + dim_offset(dst, a, a0 + j)
                else:
                    idx[a] = a0 + j
                    c = side_offset(dst, idx, rank)
                copy_strided(dst.base + c, sdb, buf + j * lb * isz, isz, lb, isz,
                             st and lb * isz >= STREAM_MIN_RUN)
            if not more:
                break
            a0 = a1
            b0 = b1
            la = la1
            lb = lb1
            swap = cur
            cur = nxt
            nxt = swap
        idx[a] = 0
        idx[b] = 0
        if not _next_index(idx, dims, rank, a, b):
            break
    if stream:
        xs_store_fence()

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
    """
    cdef int64_t idx[MAX_RANK]
    cdef double buf_store[PLANE_BUF_WORDS + 8]
    cdef char* buf = _line_align(<char*>buf_store)
    cdef int64_t wsa, ssa, wdb, sdb, R, C, step, isz = dst.itemsize
    cdef xs_dimoff so
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
    if not (side_separable(dst) and side_separable(src)):
        copy_transpose_general(dst, src, dims, rank, a, b, R, C, stream)
        return
    if _edge_rows == 0 and isz == 4 and dims[b] > 1:
        # 4-byte elements: 64 x 128 blocks (pieces of 512 bytes of each source
        # row) when the source rows of a block are a multiple of 4 KiB apart,
        # so that they share a few cache sets and fetching longer pieces of
        # fewer rows pays; otherwise 128 x 64 (512-byte pieces of each
        # destination row). benchmarks/README.md has the measurements.
        so = _dimoff(src, b)
        step = (so.tab[1] - so.tab[0]) * so.scale if so.tab != NULL else so.scale
        if step % 4096 != 0:
            R, C = 128, 64
    side_window(src, a, &wsa, &ssa)
    side_window(dst, b, &wdb, &sdb)
    for k in range(rank):
        idx[k] = 0
    two = _threads == 2 and dims[a] * dims[b] * isz >= _thread_threshold and dims[b] >= 2 * R
    while True:
        if two:
            xs_transpose_plane2(dst.base + sep_base(dst, idx, rank, a, b), _dimoff(dst, a),
                                _dimoff(dst, b), src.base + sep_base(src, idx, rank, a, b),
                                _dimoff(src, a), _dimoff(src, b), dims[a], wsa, ssa,
                                dims[b], wdb, sdb, isz, R, C, sflags)
        else:
            xs_transpose_plane(dst.base + sep_base(dst, idx, rank, a, b), _dimoff(dst, a),
                               _dimoff(dst, b), src.base + sep_base(src, idx, rank, a, b),
                               _dimoff(src, a), _dimoff(src, b), dims[a], wsa, ssa,
                               dims[b], wdb, sdb, isz, R, C, sflags, 0, dims[b], buf)
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
