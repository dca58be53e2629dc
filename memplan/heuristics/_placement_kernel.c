/* The compiled placement pass of memplan.heuristics.compiled_place: one order of units
 * placed by best fit or first fit, exactly as memplan.heuristics.placement.Placer places
 * it (same gaps, same ties), without Python's per-unit cost.
 *
 *   address
 *     ^        placed partner j           the unit's base may not lie in
 *     |     [====off[j], off[j]+size[j])  (off[j] - rel - size, off[j] + size[j] - rel)
 *     |  [..gap..)      [....gap....)     for each member (rel, size) it meets in time
 *     +-------------------------------> base
 *
 * Steps:
 * - partners: per buffer, the buffers of other units whose half-open lifetimes meet its
 *   own (a run of the buffers sorted by start: those that start before it ends), and its
 *   explicit conflicts; a CSR built in two passes, O(n + E) for E pairs;
 * - for each unit of the order: the forbidden base intervals of its placed partners,
 *   sorted by (lo, hi); a sweep for the gap: the first that fits (first fit) or the
 *   tightest that fits, the first of equals (best fit); none: on top of the highest;
 *   the base rounded up to the unit's alignment (base % modulus == residue);
 * - a time limit: every CLOCK_EVERY units the clock is read; past the deadline, every
 *   unit left is stacked on top of the peak (still a valid plan) and counted as cut.
 *
 * Cost: O(n log n + E log L) for L buffers live at once; memory O(n + E).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLOCK_EVERY 64

typedef struct { int64_t lo, hi; } Span; /* a forbidden base interval [lo, hi) */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t aligned(int64_t at, int64_t residue, int64_t modulus) {
    int64_t r = (residue - at) % modulus; /* Python's %: never negative */
    if (r < 0) r += modulus;
    return at + r;
}

static int by_lo(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->lo != y->lo) return x->lo < y->lo ? -1 : 1;
    if (x->hi != y->hi) return x->hi < y->hi ? -1 : 1;
    return 0;
}

/* The base that fits among k forbidden intervals (sorted here): best fit or lowest. */
static int64_t choose_gap(Span *s, int64_t k, int64_t residue, int64_t modulus, int best) {
    qsort(s, (size_t)k, sizeof(Span), by_lo);
    int64_t reach = 0, tightest = 0, chosen = 0;
    int found = 0;
    for (int64_t i = 0; i < k; i++) {
        int64_t base = aligned(reach, residue, modulus);
        if (base < s[i].lo) {
            if (!best) return base;
            if (!found || s[i].lo - reach < tightest) {
                tightest = s[i].lo - reach;
                chosen = base;
                found = 1;
            }
        }
        if (s[i].hi > reach) reach = s[i].hi;
    }
    return found ? chosen : aligned(reach, residue, modulus);
}

typedef struct {
    int64_t n, units, m, nconf;
    const int64_t *size, *start, *end, *unit_of, *rel, *member_ptr, *members;
    const int64_t *extent, *residue, *modulus, *by_start, *conflicts, *order;
    int best, timed;
    double seconds;
    int64_t *base; /* out: per unit */
    int64_t cut;   /* out */
} Pass;

/* 0: done; -1: out of memory. */
static int run(Pass *p) {
    double deadline = now() + p->seconds; /* listing the pairs counts against it too */
    int64_t n = p->n, code = -1;
    int64_t *ptr = calloc((size_t)n + 1, sizeof(int64_t));
    int64_t *fill = NULL, *partner = NULL, *offset = NULL;
    char *placed = NULL;
    Span *spans = NULL;
    if (!ptr) goto done;
    for (int64_t a = 0; a < n; a++) { /* count the pairs */
        int64_t i = p->by_start[a];
        for (int64_t b = a + 1; b < n && p->start[p->by_start[b]] < p->end[i]; b++) {
            int64_t j = p->by_start[b];
            if (p->unit_of[i] != p->unit_of[j]) { ptr[i + 1]++; ptr[j + 1]++; }
        }
    }
    for (int64_t c = 0; c < p->nconf; c++) {
        int64_t i = p->conflicts[2 * c], j = p->conflicts[2 * c + 1];
        if (p->unit_of[i] != p->unit_of[j]) { ptr[i + 1]++; ptr[j + 1]++; }
    }
    for (int64_t i = 0; i < n; i++) ptr[i + 1] += ptr[i];
    fill = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    partner = malloc(sizeof(int64_t) * (size_t)(ptr[n] ? ptr[n] : 1));
    offset = calloc((size_t)(n ? n : 1), sizeof(int64_t));
    placed = calloc((size_t)(n ? n : 1), 1);
    if (!fill || !partner || !offset || !placed) goto done;
    memcpy(fill, ptr, sizeof(int64_t) * (size_t)n);
    for (int64_t a = 0; a < n; a++) { /* list them */
        int64_t i = p->by_start[a];
        for (int64_t b = a + 1; b < n && p->start[p->by_start[b]] < p->end[i]; b++) {
            int64_t j = p->by_start[b];
            if (p->unit_of[i] != p->unit_of[j]) { partner[fill[i]++] = j; partner[fill[j]++] = i; }
        }
    }
    for (int64_t c = 0; c < p->nconf; c++) {
        int64_t i = p->conflicts[2 * c], j = p->conflicts[2 * c + 1];
        if (p->unit_of[i] != p->unit_of[j]) { partner[fill[i]++] = j; partner[fill[j]++] = i; }
    }
    int64_t room = 0, peak = 0;
    p->cut = 0;
    for (int64_t c = 0; c < p->m; c++) {
        int64_t u = p->order[c], base;
        if (!p->cut && p->timed && c % CLOCK_EVERY == 0 && (p->seconds <= 0 || now() > deadline))
            p->cut = p->m - c;
        if (p->cut) {
            base = aligned(peak, p->residue[u], p->modulus[u]);
        } else {
            int64_t k = 0, need = 0;
            for (int64_t q = p->member_ptr[u]; q < p->member_ptr[u + 1]; q++) {
                int64_t mb = p->members[q];
                need += ptr[mb + 1] - ptr[mb];
            }
            if (need > room) {
                Span *grown = realloc(spans, sizeof(Span) * (size_t)need);
                if (!grown) goto done;
                spans = grown;
                room = need;
            }
            for (int64_t q = p->member_ptr[u]; q < p->member_ptr[u + 1]; q++) {
                int64_t mb = p->members[q], rel = p->rel[mb], reach = rel + p->size[mb] - 1;
                for (int64_t e = ptr[mb]; e < ptr[mb + 1]; e++) {
                    int64_t j = partner[e];
                    if (!placed[j]) continue;
                    spans[k].lo = offset[j] - reach;
                    spans[k].hi = offset[j] + p->size[j] - rel;
                    k++;
                }
            }
            base = choose_gap(spans, k, p->residue[u], p->modulus[u], p->best);
        }
        for (int64_t q = p->member_ptr[u]; q < p->member_ptr[u + 1]; q++) {
            int64_t mb = p->members[q];
            offset[mb] = base + p->rel[mb];
            placed[mb] = 1;
        }
        p->base[u] = base;
        if (base + p->extent[u] > peak) peak = base + p->extent[u];
    }
    code = 0;
done:
    free(ptr); free(fill); free(partner); free(offset); free(placed); free(spans);
    return (int)code;
}

static PyObject *place(PyObject *self, PyObject *args) {
    Py_buffer b[13];
    int best, timed;
    double seconds;
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*iid", &b[0], &b[1], &b[2], &b[3],
                          &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12],
                          &best, &timed, &seconds))
        return NULL;
    PyObject *result = NULL;
    Pass p;
    memset(&p, 0, sizeof p);
    const int64_t *a[13];
    for (int i = 0; i < 13; i++) a[i] = b[i].buf;
    p.size = a[0]; p.start = a[1]; p.end = a[2]; p.unit_of = a[3]; p.rel = a[4];
    p.member_ptr = a[5]; p.members = a[6]; p.extent = a[7]; p.residue = a[8];
    p.modulus = a[9]; p.by_start = a[10]; p.conflicts = a[11]; p.order = a[12];
    p.n = b[0].len / (Py_ssize_t)sizeof(int64_t);
    p.units = b[7].len / (Py_ssize_t)sizeof(int64_t);
    p.nconf = b[11].len / (Py_ssize_t)(2 * sizeof(int64_t));
    p.m = b[12].len / (Py_ssize_t)sizeof(int64_t);
    p.best = best; p.timed = timed; p.seconds = seconds;
    int ok = 1;
    for (int i = 1; i < 11; i++) {
        Py_ssize_t want = (i == 5 ? p.units + 1 : (i >= 7 && i <= 9) ? p.units : p.n);
        if (b[i].len != want * (Py_ssize_t)sizeof(int64_t)) ok = 0;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "place: arrays of the wrong lengths");
        goto release;
    }
    p.base = calloc((size_t)(p.units ? p.units : 1), sizeof(int64_t));
    if (!p.base) { PyErr_NoMemory(); goto release; }
    int code;
    Py_BEGIN_ALLOW_THREADS
    code = run(&p);
    Py_END_ALLOW_THREADS
    if (code) PyErr_NoMemory();
    else result = Py_BuildValue("(y#L)", (const char *)p.base,
                                (Py_ssize_t)(p.units * (Py_ssize_t)sizeof(int64_t)),
                                (long long)p.cut);
    free(p.base);
release:
    for (int i = 0; i < 13; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"place", place, METH_VARARGS,
     "place(sizes, starts, ends, unit_of, rel, member_ptr, members, extent, residue, modulus,"
     " by_start, conflicts, order, best, timed, seconds) -> (bases, cut);"
     " see memplan.heuristics.compiled_place"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_placement_kernel",
                                    "The compiled pass of memplan.heuristics.compiled_place.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__placement_kernel(void) { return PyModule_Create(&module); }
