/* xlashape's hand-written C kernels (declared in _kernels.h, which says what
   they are for; _kernels.pxi decides what to copy where). */
#include "_kernels.h"

/* xs_unzip_direct; with stream (and contiguous rows) through a small
   staging buffer, so each row is written by whole-line streaming stores
   (not into k rows by turns: benchmarks/README.md, "Notes moved out of the
   code"). */
#define XS_STAGE 512
void xs_unzip(char* const* rows, int64_t ds, const char* s, int64_t n, int k,
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
#define XS_TSCALAR(T) do { \
    xs_prefetch_rows(pf, (i0 * npf) / (nr ? nr : 1), npf, pfbytes); \
    for (j = 0; j < nc; j++) \
        for (i = i0; i < nr; i++) \
            memcpy(buf + j * ost + i * (int64_t)sizeof(T), rows[i] + j * ss, sizeof(T)); \
} while (0)
#define XS_TCOLS(T, j0) do { \
    for (j = (j0); j < nc; j++) \
        for (i = i0; i < i0 + step; i++) \
            memcpy(buf + j * ost + i * (int64_t)sizeof(T), rows[i] + j * ss, sizeof(T)); \
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
#define XS_PF_GROUP() do { \
    if (npf == nr) \
        xs_prefetch_rows(pf, i0, i0 + step, pfbytes); \
    else if (npf) \
        xs_prefetch_rows(pf, (i0 * npf) / nr, ((i0 + step) * npf) / nr, pfbytes); \
} while (0)
#ifdef XS_AVX2
#include <immintrin.h>
int xs_avx2_state = -1;
/* Four rows interleaved byte by byte (s[4j + q] = row q's byte j), 32
   columns (128 bytes) at a time: a byte shuffle groups each 16-byte
   lane's four columns by row, two rounds of unpacks gather each row's
   four-byte groups, a dword permutation puts them in column order. */
__attribute__((target("avx2")))
int64_t xs_unzip4_u8_avx2(char* const* rows, const char* s, int64_t n) {
    const __m256i by_row = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14,
                                            3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13,
                                            2, 6, 10, 14, 3, 7, 11, 15);
    /* after the unpacks a row's dwords hold columns 0, 8, 16, 24, 4, 12, 20, 28 (x4) */
    const __m256i in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    char *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
    int64_t j;
    for (j = 0; j + 32 <= n; j += 32) {
        const char* p = s + 4 * j;
        __m256i v0 = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i*)p), by_row);
        __m256i v1 = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i*)(p + 32)), by_row);
        __m256i v2 = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i*)(p + 64)), by_row);
        __m256i v3 = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i*)(p + 96)), by_row);
        __m256i t0 = _mm256_unpacklo_epi32(v0, v1), t1 = _mm256_unpackhi_epi32(v0, v1);
        __m256i t2 = _mm256_unpacklo_epi32(v2, v3), t3 = _mm256_unpackhi_epi32(v2, v3);
        _mm256_storeu_si256((__m256i*)(r0 + j),
                            _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi64(t0, t2), in_order));
        _mm256_storeu_si256((__m256i*)(r1 + j),
                            _mm256_permutevar8x32_epi32(_mm256_unpackhi_epi64(t0, t2), in_order));
        _mm256_storeu_si256((__m256i*)(r2 + j),
                            _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi64(t1, t3), in_order));
        _mm256_storeu_si256((__m256i*)(r3 + j),
                            _mm256_permutevar8x32_epi32(_mm256_unpackhi_epi64(t1, t3), in_order));
    }
    return j;
}
/* Two rows of 2-byte elements interleaved (s[2j + q] = row q's element j),
   16 columns (64 bytes) at a time: a byte shuffle puts each 16-byte lane's
   four elements of row 0 before its four of row 1, 64-bit unpacks gather
   each row's halves, a qword permutation puts them in column order. */
__attribute__((target("avx2")))
int64_t xs_unzip2_u16_avx2(char* const* rows, const char* s, int64_t n) {
    const __m256i by_row = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11,
                                            14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7,
                                            10, 11, 14, 15);
    char *r0 = rows[0], *r1 = rows[1];
    int64_t j;
    for (j = 0; j + 16 <= n; j += 16) {
        const char* p = s + 4 * j;
        /* x: columns 0-3 | 4-7, y: 8-11 | 12-15, each lane row 0's four then row 1's */
        __m256i x = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i*)p), by_row);
        __m256i y = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i*)(p + 32)), by_row);
        /* unpacks: columns 0-3, 8-11 | 4-7, 12-15 of one row; qwords 0, 2, 1, 3 in order */
        _mm256_storeu_si256((__m256i*)(r0 + 2 * j),
                            _mm256_permute4x64_epi64(_mm256_unpacklo_epi64(x, y), 0xD8));
        _mm256_storeu_si256((__m256i*)(r1 + 2 * j),
                            _mm256_permute4x64_epi64(_mm256_unpackhi_epi64(x, y), 0xD8));
    }
    return j;
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
void xs_band_runs(char* dbase, const int64_t* rd, xs_dimoff dD, int64_t wd,
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

/* Byte offset of element (a, b) of a plane (see xs_plane). */
static inline int64_t xs_at(const xs_plane* p, int64_t a, int64_t b) {
    return p->fn ? p->fn(p->ctx, a, b) : xs_off(p->A, a) + xs_off(p->B, b);
}

/* The transposing copy of one plane: element (a, b) goes from
   sbase + xs_at(sp, a, b) to dbase + xs_at(dp, a, b). The source runs along
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
void xs_transpose_plane(char* dbase, const xs_plane* dplane,
                        const char* sbase, const xs_plane* splane,
                        int64_t na, int64_t wsa, int64_t ssa,
                        int64_t nbd, int64_t wdb, int64_t sdb,
                        int64_t isz, int64_t R, int64_t C, int stream,
                        int64_t b_begin, int64_t b_end, char* buf) {
    /* local copies: the bytes this function stores cannot alias them, so
       the compiler keeps them in registers across the copy loops */
    const xs_plane dloc = *dplane, sloc = *splane;
    const xs_plane* const dp = &dloc;
    const xs_plane* const sp = &sloc;
    const char* rows_a[XS_MAX_EDGE];
    const char* rows_b[XS_MAX_EDGE];
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
       the line from memory first. Only for a separable destination, whose
       rows continue the same way at every a. */
    char* carry = NULL;
    int64_t prev_L = 0, next_L = 0, nb1;
    if (b_begin >= b_end || na <= 0)
        return;
    if (nbd > b_end)
        nbd = b_end;
    if (st && (stream & 2) && R * isz >= 64 && !dp->fn) {
        for (i = 0; i < na; i++)
            if (((uintptr_t)(dbase + xs_at(dp, i, b_begin))) & 63)
                break;
        if (i < na)
            carry = (char*)malloc((size_t)na * 64);
    }
    /* the first band ends where the destination rows are line aligned */
    first = R;
    if (st) {
        int64_t mis = (int64_t)(((uintptr_t)(dbase + xs_at(dp, 0, b_begin))) & 63);
        if (mis && mis % isz == 0 && (64 - mis) / isz < R)
            first = (64 - mis) / isz;
    }
    a0 = 0;
    b0 = b_begin;
    la = xs_min3(C, na, wsa);
    lb = xs_min3(first, nbd - b0, wdb - b0 % wdb);
    for (i = 0; i < lb; i++)
        cur[i] = sbase + xs_at(sp, a0, b0 + i);
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
                nxt[i] = sbase + xs_at(sp, a1, b1 + i);
        }
        /* the next block's source lines are prefetched a share at a
           time, half while this block is transposed and half while its
           rows are written, so that memory stays busy throughout */
        npf = more && pf ? lb1 : 0;
        xs_transpose(buf, ost, cur, ssa, lb, la, isz, nxt, npf / 2, la1 * isz);
        {
            const char* bp = buf;
            int64_t L = lb * isz, pdone = npf / 2, pto;
            int nt = st && L >= 64, straddle = 0, defer = 0;
            const int64_t dcol = dp->fn ? 0 : xs_off(dp->B, b0);
            if (carry && L >= 64) {
                /* the bands before and after this one, when they continue
                   the destination rows exactly (pieces of 64 bytes or
                   more on both sides of a line, as xs_row_run wants) */
                if (a0 == 0) {
                    nb1 = b0 + lb;
                    next_L = 0;
                    if (nb1 < nbd && xs_off(dp->B, nb1) == xs_off(dp->B, b0) + L)
                        next_L = xs_min3(R, nbd - nb1, wdb - nb1 % wdb) * isz;
                }
                straddle = prev_L >= 64;
                defer = next_L >= 64;
            }
            for (j = 0; j < la; j++, bp += ost) {
                char* d = dbase + (dp->fn ? dp->fn(dp->ctx, a0 + j, b0)
                                          : xs_off(dp->A, a0 + j) + dcol);
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
    char* dbase; const xs_plane* dp;
    const char* sbase; const xs_plane* sp;
    int64_t na, wsa, ssa, nbd, wdb, sdb, isz, R, C;
    int stream;
    int64_t b_begin, b_end;
} xs_plane_job;
static void xs_plane_job_run(void* p) {
    xs_plane_job* j = (xs_plane_job*)p;
    char store[XS_BLOCK_BUF_BYTES + 64];
    char* buf = store + ((64 - ((uintptr_t)store & 63)) & 63);
    xs_transpose_plane(j->dbase, j->dp, j->sbase, j->sp, j->na, j->wsa, j->ssa, j->nbd,
                       j->wdb, j->sdb, j->isz, j->R, j->C, j->stream, j->b_begin, j->b_end,
                       buf);
    if (j->stream)
        xs_store_fence();
}
/* A plane on two threads: the rows along b split in two halves (at a
   multiple of R), one per thread. A side addressed by a function (whose
   context need not be safe to share) keeps the plane on this thread. */
void xs_transpose_plane2(char* dbase, const xs_plane* dp,
                         const char* sbase, const xs_plane* sp,
                         int64_t na, int64_t wsa, int64_t ssa,
                         int64_t nbd, int64_t wdb, int64_t sdb,
                         int64_t isz, int64_t R, int64_t C, int stream) {
    xs_plane_job j[2];
    int64_t mid = (nbd / 2) / R * R;
    j[0].dbase = dbase; j[0].dp = dp;
    j[0].sbase = sbase; j[0].sp = sp;
    j[0].na = na; j[0].wsa = wsa; j[0].ssa = ssa; j[0].nbd = nbd; j[0].wdb = wdb;
    j[0].sdb = sdb; j[0].isz = isz; j[0].R = R; j[0].C = C; j[0].stream = stream;
    j[0].b_begin = 0; j[0].b_end = nbd;
    if (dp->fn || sp->fn) {
        xs_plane_job_run(&j[0]);
        return;
    }
    j[1] = j[0];
    j[0].b_end = mid;
    j[1].b_begin = mid;
    xs_run2(xs_plane_job_run, &j[0], &j[1]);
}
