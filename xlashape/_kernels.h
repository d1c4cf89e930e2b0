/* xlashape's hand-written C kernels: the byte-moving inner loops of
   LayoutArray's bulk copies (pack, unpack, relayout, fill), called from
   _kernels.pxi, which decides what to copy where (see the comment at its
   top). Built into the xlashape._core extension by setup.py, with
   -Wall -Wextra. x86-64 gets SSE2 (always there) and, where the processor
   has it, AVX2 for one transpose and two unzips (run-time check); elsewhere
   the same results in plain C.

   Declared for Cython in _core.pxd. The helpers that the Cython loops call
   once per run (copies, interleaving) are static inline here, so that they
   are inlined into _core.c as they were when all of this was one file; the
   rest are defined in _kernels.c. Nothing here touches a Python object
   or needs the GIL. */
#ifndef XLASHAPE_KERNELS_H
#define XLASHAPE_KERNELS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define XS_SSE2 1
#endif

/* the kernels' symbols stay inside the extension module */
#if defined(__GNUC__)
#define XS_INTERNAL __attribute__((visibility("hidden")))
#else
#define XS_INTERNAL
#endif

/* The transposing copy's block buffer: up to 128 rows of at most
   32768 / 128 block bytes plus a 64-byte pad each (_kernels.pxi's
   MAX_EDGE, BLOCK_BUF and PLANE_BUF_WORDS). */
#define XS_MAX_EDGE 128
#define XS_BLOCK_BUF_BYTES (32768 + XS_MAX_EDGE * 64)

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
static inline void xs_row_run(char* d, const char* s, int64_t L, const char* prev_end,
                              int defer) {
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

/* One element of isz bytes: a constant-size copy (plain loads and stores,
   no library call) for the usual sizes. */
static inline void xs_elem(char* d, const char* s, int64_t isz) {
    switch (isz) {
    case 1: *d = *s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    case 8: memcpy(d, s, 8); break;
    default: memcpy(d, s, (size_t)isz);
    }
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
static inline void xs_zip(char* d, const char* const* rows, int64_t ss, int64_t n,
                          int k, int64_t isz, int stream) {
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
            xs_elem(d + (j * k + q) * isz, rows[q] + j * ss, isz);
}

#if defined(XS_SSE2) && defined(__GNUC__) && defined(__x86_64__)
/* AVX2, where the processor has it: the kernels that use it are compiled
   for it separately (target attribute), the rest of the module is not. */
#define XS_AVX2 1
XS_INTERNAL extern int xs_avx2_state;     /* -1: not asked yet */
static inline int xs_has_avx2(void) {
    if (xs_avx2_state < 0)
        xs_avx2_state = __builtin_cpu_supports("avx2") ? 1 : 0;
    return xs_avx2_state;
}
/* xs_unzip_direct's 1-byte 4-row and 2-byte 2-row cases with AVX2: the
   columns done (a multiple of 32 or 16, the rest left to the caller). */
XS_INTERNAL int64_t xs_unzip4_u8_avx2(char* const* rows, const char* s, int64_t n);
XS_INTERNAL int64_t xs_unzip2_u16_avx2(char* const* rows, const char* s, int64_t n);
#endif

/* The inverse of xs_zip: rows[q][j] = s[j*k + q] (rows' elements ds
   bytes apart), plain stores. */
static inline void xs_unzip_direct(char* const* rows, int64_t ds, const char* s,
                                   int64_t n, int k, int64_t isz) {
    int64_t j = 0;
    int q;
#ifdef XS_SSE2
    const int nt = 0;
#ifdef XS_AVX2
    if (ds == 1 && isz == 1 && k == 4 && n >= 32 && xs_has_avx2())
        j = xs_unzip4_u8_avx2(rows, s, n);
    else if (ds == 2 && isz == 2 && k == 2 && n >= 16 && xs_has_avx2())
        j = xs_unzip2_u16_avx2(rows, s, n);
#endif
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
            int round;
            for (round = 0; round < 4; round++) {
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
            xs_elem(rows[q] + j * ds, s + (j * k + q) * isz, isz);
}

/* A dimension's share of a separable side's byte offset:
   tab ? tab[i] * scale : i * scale. */
typedef struct { const int64_t* tab; int64_t scale; } xs_dimoff;

/* How the transposing copy finds element (a, b) of one plane (the other
   dimensions fixed), as a byte offset from the plane's base: xs_off(A, a) +
   xs_off(B, b) for a separable side; fn(ctx, a, b) for one that is not
   (tiles that combine dimensions with '*'), with A and B unused. */
typedef int64_t (*xs_addr_fn)(void* ctx, int64_t a, int64_t b);
typedef struct {
    xs_dimoff A, B;
    xs_addr_fn fn;
    void* ctx;
} xs_plane;

/* xs_unzip_direct, with whole-line streaming stores when stream is set. */
XS_INTERNAL void xs_unzip(char* const* rows, int64_t ds, const char* s, int64_t n, int k,
                          int64_t isz, int stream);

/* The run copy's plain case: nb rows, both sides contiguous along the run. */
XS_INTERNAL void xs_band_runs(char* dbase, const int64_t* rd, xs_dimoff dD, int64_t wd,
                              const char* sbase, const int64_t* rs, xs_dimoff sD, int64_t ws,
                              int nb, int64_t n, int64_t isz, int stream);

/* The transposing copy of one plane, on this thread (rows b_begin..b_end
   along b, buf: XS_BLOCK_BUF_BYTES, line aligned) or split between two
   (both sides separable). */
XS_INTERNAL void xs_transpose_plane(char* dbase, const xs_plane* dp,
                                    const char* sbase, const xs_plane* sp,
                                    int64_t na, int64_t wsa, int64_t ssa,
                                    int64_t nbd, int64_t wdb, int64_t sdb,
                                    int64_t isz, int64_t R, int64_t C, int stream,
                                    int64_t b_begin, int64_t b_end, char* buf);
XS_INTERNAL void xs_transpose_plane2(char* dbase, const xs_plane* dp,
                                     const char* sbase, const xs_plane* sp,
                                     int64_t na, int64_t wsa, int64_t ssa,
                                     int64_t nbd, int64_t wdb, int64_t sdb,
                                     int64_t isz, int64_t R, int64_t C, int stream);

#endif /* XLASHAPE_KERNELS_H */
