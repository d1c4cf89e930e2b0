/* xlashape's hand-written C kernels: the byte-moving inner loops of
   LayoutArray's bulk copies (pack, unpack, relayout, fill), called from
   _kernels.pxi, which decides what to copy where (see the comment at its
   top). Built into the xlashape._core extension by setup.py, with
   -Wall -Wextra. x86-64 gets SSE2 (always there) and, where the processor
   has it, AVX2 for one transpose; elsewhere the same results in plain C.

   Declared for Cython in _kernels.pxd. The few helpers that the Cython loops
   call per run are static inline here, so they stay inlined into _core.c;
   the rest are defined in _kernels.c. Nothing here touches a Python object
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

/* One run of L bytes of a destination row written run after run, whole
   lines with streaming stores (see _kernels.c). */
XS_INTERNAL void xs_row_run(char* d, const char* s, int64_t L, const char* prev_end, int defer);

/* Interleave k rows of n elements into one contiguous stretch, and back. */
XS_INTERNAL void xs_zip(char* d, const char* const* rows, int64_t ss, int64_t n, int k,
                        int64_t isz, int stream);
XS_INTERNAL void xs_unzip_direct(char* const* rows, int64_t ds, const char* s, int64_t n,
                                 int k, int64_t isz);
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
