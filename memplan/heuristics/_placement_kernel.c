/* The compiled passes of memplan.heuristics.compiled_place, each the plan of its Python
 * twin (same gaps, same ties) without Python's per-unit cost: `place`, one order of units
 * placed by best fit or first fit as memplan.heuristics.placement.Placer places it, against
 * an interval structure over time instead of pair lists (_interval_place.h), and `sweep`,
 * the time sweep of memplan.heuristics.time_sweep (below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_interval_place.h"
#include "_free_gaps.h"

/* What a pass returns to Python: (the unit bases as bytes, the units cut), or the memory
 * error of a run that returned -1, or the exception of a signal handler (INTERRUPTED: it
 * is set); frees the bases either way. */
static PyObject *finished(int code, int64_t *base, int64_t units, int64_t cut) {
    PyObject *result = NULL;
    if (code == -1) PyErr_NoMemory();
    else if (!code) result = Py_BuildValue("(y#L)", (const char *)base,
                                (Py_ssize_t)(units * (Py_ssize_t)sizeof(int64_t)),
                                (long long)cut);
    free(base);
    return result;
}

/* The problem's columns of a `place` call, checked: 1, or 0 with a ValueError set. */
static int geometry_columns(Geometry *g, Py_buffer *b) {
    const int64_t *a[13];
    for (int i = 0; i < 13; i++) a[i] = b[i].buf;
    g->size = a[0]; g->start = a[1]; g->end = a[2]; g->unit_of = a[3]; g->rel = a[4];
    g->member_ptr = a[5]; g->members = a[6]; g->extent = a[7]; g->residue = a[8];
    g->modulus = a[9]; g->pinned_base = a[10]; g->by_start = a[11]; g->conflicts = a[12];
    g->n = b[0].len / (Py_ssize_t)sizeof(int64_t);
    g->units = b[7].len / (Py_ssize_t)sizeof(int64_t);
    g->nconf = b[12].len / (Py_ssize_t)(2 * sizeof(int64_t));
    int ok = 1;
    for (int i = 1; i < 12; i++) {
        Py_ssize_t want = (i == 5 ? g->units + 1 : (i >= 7 && i <= 10) ? g->units : g->n);
        if (b[i].len != want * (Py_ssize_t)sizeof(int64_t)) ok = 0;
    }
    if (!ok) PyErr_SetString(PyExc_ValueError, "place: arrays of the wrong lengths");
    return ok;
}

static PyObject *place(PyObject *self, PyObject *args) {
    Py_buffer b[14];
    int best, timed;
    double seconds;
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*y*iid", &b[0], &b[1], &b[2],
                          &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11],
                          &b[12], &b[13], &best, &timed, &seconds))
        return NULL;
    PyObject *result = NULL;
    Geometry g;
    memset(&g, 0, sizeof g);
    if (!geometry_columns(&g, b)) goto release;
    const int64_t *order = b[13].buf;
    int64_t m = b[13].len / (Py_ssize_t)sizeof(int64_t), cut = 0;
    int64_t *base = calloc((size_t)(g.units ? g.units : 1), sizeof(int64_t));
    if (!base) { PyErr_NoMemory(); goto release; }
    int code;
    Py_BEGIN_ALLOW_THREADS
    double deadline = now() + seconds; /* building the structure counts against it too */
    code = geometry_build(&g);
    if (!code) {
        int64_t peak = decode(&g, order, m, 0, base, best, timed, deadline, &cut, INT64_MAX);
        code = peak == INTERRUPTED ? INTERRUPTED : peak < 0 ? -1 : 0;
    }
    geometry_free(&g);
    Py_END_ALLOW_THREADS
    result = finished(code, base, g.units, cut);
release:
    for (int i = 0; i < 14; i++) PyBuffer_Release(&b[i]);
    return result;
}

/* ---- The time sweep of memplan.heuristics.time_sweep over its free gaps ----
 *
 * The loop of time_sweep.free_list_sweep, the same gaps chosen with the same ties, over
 * the trees of _free_gaps.h:
 * - the pinned units' bytes are never free;
 * - per unit in sweep order: the units whose span ended by its start give their bytes
 *   back (merged with the gaps they touch); then it takes, its base aligned
 *   (base % modulus == residue), the first gap by (size, lo) from (extent, -1) on that
 *   fits (best fit; none: the top gap), or the lowest that fits (first fit);
 * - every clock_every units the clock is read; past the deadline, the units left are
 *   stacked on the peak and counted as cut.
 *
 * Cost: O(n log n): per unit a few tree searches, splits and merges of O(log g) for g free
 * gaps (tens of thousands at 10^6 buffers), plus, rarely, gaps stepped over whose size
 * fits but whose aligned base does not; memory O(n).
 */

typedef struct {
    int64_t units, m, e, r; /* units; units in sweep order; units by end; reserved ranges */
    const int64_t *extent, *residue, *modulus, *order, *starts, *by_end, *ends, *reserved;
    int64_t peak, clock_every;
    int best, timed;
    double seconds;
    int64_t *base; /* in: the pinned units' bases; out: every unit's */
    int64_t cut;   /* out */
} Sweep;

/* 0: done; -1: out of memory. */
static int sweep_run(Sweep *s) {
    FreeGaps f; /* gaps lie between used blocks: at most one per live or reserved unit */
    if (gaps_init(&f, s->r + s->m + 2, s->best)) return -1;
    int64_t reach = 0, peak = s->peak, released = 0;
    for (int64_t k = 0; k < s->r; k++) { /* sorted by lo */
        int64_t lo = s->reserved[2 * k], hi = s->reserved[2 * k + 1];
        if (lo > reach) gaps_insert(&f, reach, lo);
        if (hi > reach) reach = hi;
    }
    gaps_insert(&f, reach, TOP);
    double deadline = now() + s->seconds;
    s->cut = 0;
    for (int64_t c = 0; c < s->m; c++) {
        int64_t u = s->order[c];
        if (!s->cut && s->timed && c % s->clock_every == 0 && (s->seconds <= 0 || now() > deadline))
            s->cut = s->m - c;
        if (s->cut) {
            s->base[u] = aligned(peak, s->residue[u], s->modulus[u]);
            peak = s->base[u] + s->extent[u];
            continue;
        }
        while (released < s->e && s->ends[released] <= s->starts[c]) {
            int64_t done = s->by_end[released++];
            if (s->extent[done]) gaps_give(&f, s->base[done], s->base[done] + s->extent[done]);
        }
        if (!s->extent[u]) continue;
        s->base[u] = gaps_take(&f, s->extent[u], s->residue[u], s->modulus[u], s->best);
        if (s->base[u] + s->extent[u] > peak) peak = s->base[u] + s->extent[u];
    }
    gaps_free(&f);
    return 0;
}

static int in_range(const int64_t *a, int64_t n, int64_t low, int64_t high) {
    for (int64_t i = 0; i < n; i++)
        if (a[i] < low || a[i] >= high) return 0;
    return 1;
}

static PyObject *sweep(PyObject *self, PyObject *args) {
    Py_buffer b[9];
    long long peak, clock_every;
    int best, timed;
    double seconds;
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*LiLid", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &b[8], &peak, &best, &clock_every, &timed,
                          &seconds))
        return NULL;
    PyObject *result = NULL;
    Sweep s;
    memset(&s, 0, sizeof s);
    const int64_t *a[9];
    int64_t len[9];
    int ok = 1;
    for (int i = 0; i < 9; i++) {
        a[i] = b[i].buf;
        len[i] = b[i].len / (Py_ssize_t)sizeof(int64_t);
        if (b[i].len % (Py_ssize_t)sizeof(int64_t)) ok = 0;
    }
    s.extent = a[0]; s.residue = a[1]; s.modulus = a[2]; s.order = a[3]; s.starts = a[4];
    s.by_end = a[5]; s.ends = a[6]; s.reserved = a[7];
    s.units = len[0]; s.m = len[3]; s.e = len[5]; s.r = len[7] / 2;
    s.peak = peak; s.best = best; s.clock_every = clock_every; s.timed = timed;
    s.seconds = seconds;
    ok = ok && len[1] == s.units && len[2] == s.units && len[8] == s.units && len[4] == s.m
         && len[6] == s.e && len[7] % 2 == 0 && clock_every >= 1
         && in_range(s.modulus, s.units, 1, INT64_MAX) && in_range(s.order, s.m, 0, s.units)
         && in_range(s.by_end, s.e, 0, s.units);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "sweep: arrays of the wrong lengths or values");
        goto release;
    }
    s.base = malloc(sizeof(int64_t) * (size_t)(s.units ? s.units : 1));
    if (!s.base) { PyErr_NoMemory(); goto release; }
    memcpy(s.base, a[8], sizeof(int64_t) * (size_t)s.units);
    int code;
    Py_BEGIN_ALLOW_THREADS
    code = sweep_run(&s);
    Py_END_ALLOW_THREADS
    result = finished(code, s.base, s.units, s.cut);
release:
    for (int i = 0; i < 9; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"place", place, METH_VARARGS,
     "place(sizes, starts, ends, unit_of, rel, member_ptr, members, extent, residue, modulus,"
     " pinned_base, by_start, conflicts, order, best, timed, seconds) -> (bases, cut);"
     " see memplan.heuristics.compiled_place"},
    {"sweep", sweep, METH_VARARGS,
     "sweep(extent, residue, modulus, order, starts, by_end, ends, reserved, base, peak, best,"
     " clock_every, timed, seconds) -> (bases, cut); see memplan.heuristics.compiled_place"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_placement_kernel",
                                    "The compiled passes of memplan.heuristics.compiled_place.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__placement_kernel(void) {
    signals_thread = PyThread_get_thread_ident();
    return PyModule_Create(&module);
}
