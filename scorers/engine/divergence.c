/* The distributional statistics of divergence.py on a CPU, one row at a time, fused: per chunk of a
   row's vocabulary d = z - max, exp(d * base) per temperature group and its powers, every sum, all in
   L1; exp(d * base) of the row is kept for a second loop, which sums w log w, w = e_x + r e_o, with
   r = S_x / S_o from the first (keeping it measured faster than computing it again).
   Built by native.py with the system's C compiler; exp and log are glibc's vector versions. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#pragma omp declare simd notinbranch
extern double exp(double);
#pragma omp declare simd notinbranch
extern double log(double);

#define CH 256    /* entries per chunk: d, the powers and w of every head stay in L1 */
#define LANES 16

typedef struct {
    int64_t heads, n_t, n_g, x, n_o, vocab;
    const int64_t *ptr, *width, *stride, *first; /* column blocks of head h: first[h] .. first[h + 1] */
    const int64_t *bf16;                         /* per block: bfloat16 logits (else float32) */
    const double *base;                          /* [n_g] */
    const int64_t *group, *power;                /* [n_t]: a temperature's group and power */
    const int64_t *others;                       /* [n_o] */
} Spec;

typedef struct { int64_t block, at; } Cursor;

/* Logits [row, at .. at + len) of block b as float32 into ``out`` (a bfloat16 is a float32's top half). */
static void logits(const Spec *s, int64_t b, int64_t row, int64_t at, int64_t len, float *out) {
    if (s->bf16[b]) {
        const uint16_t *z = (const uint16_t *)(intptr_t)s->ptr[b] + row * s->stride[b] + at;
        for (int64_t k = 0; k < len; k++) {
            uint32_t u = (uint32_t)z[k] << 16;
            memcpy(out + k, &u, sizeof u);
        }
    } else {
        memcpy(out, (const float *)(intptr_t)s->ptr[b] + row * s->stride[b] + at, sizeof(float) * len);
    }
}

static double row_max(const Spec *s, int64_t h, int64_t row, float *buf) {
    float lane[LANES];
    for (int k = 0; k < LANES; k++) lane[k] = -INFINITY;
    float tail = -INFINITY;
    for (int64_t b = s->first[h]; b < s->first[h + 1]; b++)
        for (int64_t c0 = 0; c0 < s->width[b]; c0 += CH) {
            int64_t n = s->width[b] - c0 < CH ? s->width[b] - c0 : CH, c = 0;
            logits(s, b, row, c0, n, buf);
            for (; c + LANES <= n; c += LANES)
                for (int k = 0; k < LANES; k++) lane[k] = buf[c + k] > lane[k] ? buf[c + k] : lane[k];
            for (; c < n; c++) tail = buf[c] > tail ? buf[c] : tail;
        }
    for (int k = 0; k < LANES; k++) tail = lane[k] > tail ? lane[k] : tail;
    return (double)tail;
}

/* The next chunk's length: as long as every head's current block allows. */
static int64_t span(const Spec *s, const Cursor *cur) {
    int64_t len = CH;
    for (int64_t h = 0; h < s->heads; h++) {
        int64_t left = s->width[cur[h].block] - cur[h].at;
        len = left < len ? left : len;
    }
    return len;
}

/* The cursors moved past the next chunk, its length. */
static int64_t skip(const Spec *s, Cursor *cur) {
    int64_t len = span(s, cur);
    for (int64_t h = 0; h < s->heads; h++) {
        cur[h].at += len;
        if (cur[h].at == s->width[cur[h].block]) { cur[h].block++; cur[h].at = 0; }
    }
    return len;
}

/* d of every head for the next chunk, its length. */
static int64_t load(const Spec *s, Cursor *cur, int64_t row, const double *mx, double *d) {
    int64_t len = span(s, cur);
    for (int64_t h = 0; h < s->heads; h++) {
        float z[CH];
        logits(s, cur[h].block, row, cur[h].at, len, z);
        double m = mx[h], *out = d + h * CH;
        for (int64_t k = 0; k < len; k++) out[k] = (double)z[k] - m;
    }
    return skip(s, cur);
}

static void power(double *p, int64_t k, int *have, int64_t len) {
    if (have[k]) return;
    int64_t a = k / 2, b = k - a;
    power(p, a, have, len);
    power(p, b, have, len);
    for (int64_t i = 0; i < len; i++) p[(k - 1) * CH + i] = p[(a - 1) * CH + i] * p[(b - 1) * CH + i];
    have[k] = 1;
}

/* The powers of exp(d * base) of every head and group a temperature asks for (and the powers on the way):
   pw[((h * n_g + g) * 8 + k - 1) * CH]. exp(d * base) is read from ``kept`` (the first loop's) when
   ``again``, else computed and written there when ``kept`` is not NULL. */
static void powers(const Spec *s, const double *d, double *pw, double *kept, int again, int64_t len) {
    for (int64_t h = 0; h < s->heads; h++)
        for (int64_t g = 0; g < s->n_g; g++) {
            double *p = pw + (h * s->n_g + g) * 8 * CH, bg = s->base[g];
            const double *dh = d + h * CH;
            double *keep = kept ? kept + (h * s->n_g + g) * s->vocab : NULL;
            if (again) {
                memcpy(p, keep, sizeof(double) * len);
            } else {
                for (int64_t k = 0; k < len; k++) p[k] = exp(dh[k] * bg);
                if (keep) memcpy(keep, p, sizeof(double) * len);
            }
            int have[9] = {0, 1, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t t = 0; t < s->n_t; t++)
                if (s->group[t] == g) power(p, s->power[t], have, len);
        }
}

static const double *e_of(const Spec *s, const double *pw, int64_t h, int64_t t) {
    return pw + ((h * s->n_g + s->group[t]) * 8 + s->power[t] - 1) * CH;
}

/* Sums as 4 vectors of 8 partial sums (GCC's vector types: AVX-512, AVX2 or SSE registers), so that
   the adds of one sum do not wait on each other. */
typedef double v8 __attribute__((vector_size(64)));

static inline v8 at(const double *a) {
    v8 v;
    memcpy(&v, a, sizeof v);
    return v;
}

static double fold(v8 a, v8 b, v8 c, v8 d, const double *x, const double *y, int64_t k, int64_t len) {
    v8 s = (a + b) + (c + d);
    double rest = 0.0;
    for (; k < len; k++) rest += y ? x[k] * y[k] : x[k];
    for (int l = 0; l < 8; l++) rest += s[l];
    return rest;
}

static double dot(const double *x, const double *y, int64_t len) {
    v8 a = {0}, b = {0}, c = {0}, d = {0};
    int64_t k = 0;
    for (; k + 32 <= len; k += 32) {
        a += at(x + k) * at(y + k);
        b += at(x + k + 8) * at(y + k + 8);
        c += at(x + k + 16) * at(y + k + 16);
        d += at(x + k + 24) * at(y + k + 24);
    }
    return fold(a, b, c, d, x, y, k, len);
}

static double total(const double *x, int64_t len) {
    v8 a = {0}, b = {0}, c = {0}, d = {0};
    int64_t k = 0;
    for (; k + 32 <= len; k += 32) {
        a += at(x + k);
        b += at(x + k + 8);
        c += at(x + k + 16);
        d += at(x + k + 24);
    }
    return fold(a, b, c, d, x, NULL, k, len);
}

/* sum of w log w, w = ex + r eo (w log w -> 0 where w is below exp's range); ``tmp`` CH doubles. */
static double wlogw(const double *ex, const double *eo, double r, double *tmp, int64_t len) {
    for (int64_t k = 0; k < len; k++) {
        double w = ex[k] + r * eo[k];
        tmp[k] = w > 0.0 ? w * log(w) : 0.0;
    }
    return total(tmp, len);
}

static void start(const Spec *s, Cursor *cur) {
    for (int64_t h = 0; h < s->heads; h++) { cur[h].block = s->first[h]; cur[h].at = 0; }
}

/* Rows row0..row1 of: mx [n, H]; S, de (<d_h, e_h>) [n, n_t, H]; xo (<d_o, e_x>), ox (<d_x, e_o>),
   wl (sum w log w) [n, n_t, n_o]. d is z - max (not divided by T). 0 on success, 1 out of memory. */
int stats(const Spec *s, int64_t row0, int64_t row1, double *mx, double *S, double *de, double *xo, double *ox,
          double *wl) {
    int64_t H = s->heads, n_t = s->n_t, n_o = s->n_o, V = s->vocab;
    double *d = malloc(sizeof(double) * H * CH), *pw = malloc(sizeof(double) * H * s->n_g * 8 * CH);
    double *kept = n_o ? malloc(sizeof(double) * H * s->n_g * V) : NULL; /* exp(d * base) of the row */
    Cursor *cur = malloc(sizeof(Cursor) * H);
    if (!d || !pw || !cur || (n_o && !kept)) { free(d); free(pw); free(cur); free(kept); return 1; }
    for (int64_t row = row0; row < row1; row++) {
        double *m = mx + row * H, *sr = S + row * n_t * H, *dr = de + row * n_t * H;
        double *xr = xo + row * n_t * n_o, *orow = ox + row * n_t * n_o, *wr = wl + row * n_t * n_o;
        for (int64_t h = 0; h < H; h++) m[h] = row_max(s, h, row, (float *)d);
        for (int64_t k = 0; k < n_t * H; k++) sr[k] = dr[k] = 0.0;
        for (int64_t k = 0; k < n_t * n_o; k++) xr[k] = orow[k] = wr[k] = 0.0;
        start(s, cur);
        for (int64_t len, c0 = 0; cur[0].block < s->first[1] && (len = load(s, cur, row, m, d)) > 0; c0 += len) {
            powers(s, d, pw, kept ? kept + c0 : NULL, 0, len);
            for (int64_t t = 0; t < n_t; t++) {
                for (int64_t h = 0; h < H; h++) {
                    const double *e = e_of(s, pw, h, t);
                    sr[t * H + h] += total(e, len);
                    dr[t * H + h] += dot(d + h * CH, e, len);
                }
                for (int64_t o = 0; o < n_o; o++) {
                    int64_t i = s->others[o];
                    xr[t * n_o + o] += dot(d + i * CH, e_of(s, pw, s->x, t), len);
                    orow[t * n_o + o] += dot(d + s->x * CH, e_of(s, pw, i, t), len);
                }
            }
        }
        if (n_o == 0) continue;
        start(s, cur);
        for (int64_t len, c0 = 0; cur[0].block < s->first[1] && (len = skip(s, cur)) > 0; c0 += len) {
            powers(s, d, pw, kept + c0, 1, len);
            for (int64_t t = 0; t < n_t; t++)
                for (int64_t o = 0; o < n_o; o++) {
                    int64_t i = s->others[o];
                    double r = sr[t * H + s->x] / sr[t * H + i];
                    wr[t * n_o + o] += wlogw(e_of(s, pw, s->x, t), e_of(s, pw, i, t), r, d, len);
                }
        }
    }
    free(kept); free(d); free(pw); free(cur);
    return 0;
}
