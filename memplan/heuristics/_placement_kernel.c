/* The compiled passes of memplan.heuristics.compiled_place, each the plan of its Python
 * twin (same gaps, same ties) without Python's per-unit cost: `place`, one order of units
 * placed by best fit or first fit as memplan.heuristics.placement.Placer places it, against
 * an interval structure over time instead of pair lists (_interval_place.h), and `sweep`,
 * the time sweep of memplan.heuristics.time_sweep (below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_interval_place.h"

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

/* ---- The time sweep of memplan.heuristics.time_sweep over a free list ----
 *
 *   address
 *     ^   free gaps at step t:  [..)     [.....)        [..... top (open above)
 *     |   +----+     +--+             +---+
 *     |   | a  |     |b |             | c |   units a, b, c live at t
 *     +---+----+-----+--+-------------+---+--> address ranges at step t
 *
 * The loop of time_sweep.free_list_sweep over its FreeList, the same gaps chosen with
 * the same ties:
 * - the free gaps [lo, hi) in sorted arrays: by address (first fit, merging; the last
 *   is open above: hi = TOP) and, for best fit, the finite ones by (size, lo);
 *   the pinned units' bytes are never free;
 * - per unit in sweep order: the units whose span ended by its start give their bytes
 *   back (merged with the gaps they touch); then it takes, its base aligned
 *   (base % modulus == residue), the first gap by (size, lo) from (extent, -1) on that
 *   fits (best fit; none: the top gap), or the lowest that fits (first fit);
 * - every clock_every units the clock is read; past the deadline, the units left are
 *   stacked on the peak and counted as cut.
 *
 * Cost: per unit, binary searches, a scan of the gaps (best fit: from the smallest
 * large enough, rarely more than a few; first fit: from the lowest) and memmoves: of
 * the gaps below the one taken or given (stored highest first, so few for first fit)
 * and, for best fit, of the size array: O(g) for g free gaps (hundreds to 18k on
 * 100k-buffer graphs), O(n log n + n g) in all; memory O(n).
 */

#define TOP INT64_MAX

typedef struct { int64_t a, b; } Pair; /* by address: (lo, hi); by size: (hi - lo, lo) */

typedef struct {
    Pair *gap; /* by address, the highest first: GAP(f, r) is the gap of rank r */
    Pair *fit; /* the finite gaps by (size, lo), kept for best fit only */
    int64_t gaps, fits;
    int sized; /* whether fit is kept */
} FreeList;

/* The gap with r gaps below it. Stored highest first, so that a gap taken or given low
 * (first fit takes the lowest that fits) moves only the few gaps below it. */
#define GAP(f, r) ((f)->gap[(f)->gaps - 1 - (r)])

/* The first of the n sorted pairs p that is not below key (Python's bisect_left). */
static int64_t bisect(const Pair *p, int64_t n, Pair key) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (p[mid].a < key.a || (p[mid].a == key.a && p[mid].b < key.b)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The rank of the lowest gap starting at lo or above. */
static int64_t at_address(const FreeList *f, int64_t lo) {
    int64_t low = 0, high = f->gaps;
    while (low < high) {
        int64_t mid = low + (high - low) / 2;
        if (GAP(f, mid).a < lo) low = mid + 1;
        else high = mid;
    }
    return low;
}

static void fit_insert(FreeList *f, Pair key) {
    int64_t k = bisect(f->fit, f->fits, key);
    memmove(f->fit + k + 1, f->fit + k, sizeof(Pair) * (size_t)(f->fits - k));
    f->fit[k] = key;
    f->fits++;
}

static void fl_remove(FreeList *f, int64_t r) {
    Pair g = GAP(f, r);
    memmove(&GAP(f, r), &GAP(f, r) + 1, sizeof(Pair) * (size_t)r);
    f->gaps--;
    if (f->sized && g.b != TOP) {
        int64_t k = bisect(f->fit, f->fits, (Pair){g.b - g.a, g.a});
        memmove(f->fit + k, f->fit + k + 1, sizeof(Pair) * (size_t)(f->fits - k - 1));
        f->fits--;
    }
}

/* A gap of rank r. */
static void fl_insert(FreeList *f, int64_t r, int64_t lo, int64_t hi) {
    Pair *at = f->gap + f->gaps - r; /* where rank r will be */
    memmove(at + 1, at, sizeof(Pair) * (size_t)r);
    *at = (Pair){lo, hi};
    f->gaps++;
    if (f->sized && hi != TOP) fit_insert(f, (Pair){hi - lo, lo}); /* unique: lo is */
}

/* The rank of the gap to take: the smallest that fits, or the lowest. */
static int64_t fl_chosen(const FreeList *f, int64_t extent, int64_t residue, int64_t modulus,
                         int best) {
    if (best) {
        for (int64_t k = bisect(f->fit, f->fits, (Pair){extent, -1}); k < f->fits; k++) {
            int64_t size = f->fit[k].a, lo = f->fit[k].b;
            if (aligned(lo, residue, modulus) + extent <= lo + size) return at_address(f, lo);
        }
        return f->gaps - 1;
    }
    for (int64_t r = 0; r < f->gaps - 1; r++)
        if (aligned(GAP(f, r).a, residue, modulus) + extent <= GAP(f, r).b) return r;
    return f->gaps - 1; /* the top gap always fits */
}

static int64_t fl_take(FreeList *f, int64_t extent, int64_t residue, int64_t modulus,
                       int best) {
    int64_t r = fl_chosen(f, extent, residue, modulus, best);
    int64_t lo = GAP(f, r).a, hi = GAP(f, r).b, base = aligned(lo, residue, modulus);
    fl_remove(f, r);
    if (hi > base + extent) fl_insert(f, r, base + extent, hi);
    if (base > lo) fl_insert(f, r, lo, base);
    return base;
}

static void fl_give(FreeList *f, int64_t lo, int64_t hi) {
    int64_t r = at_address(f, lo);
    if (r > 0 && GAP(f, r - 1).b == lo) {
        r--;
        lo = GAP(f, r).a;
        fl_remove(f, r);
    }
    if (r < f->gaps && GAP(f, r).a == hi) {
        hi = GAP(f, r).b;
        fl_remove(f, r);
    }
    fl_insert(f, r, lo, hi);
}

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
    size_t room = (size_t)(s->r + s->m + s->e + 2); /* a take adds a gap at most, a give too */
    FreeList f = {malloc(sizeof(Pair) * room), malloc(sizeof(Pair) * room), 0, 0, s->best};
    if (!f.gap || !f.fit) {
        free(f.gap); free(f.fit);
        return -1;
    }
    int64_t reach = 0, peak = s->peak, released = 0;
    for (int64_t k = 0; k < s->r; k++) { /* sorted by lo; the gaps listed lowest first */
        int64_t lo = s->reserved[2 * k], hi = s->reserved[2 * k + 1];
        if (lo > reach) {
            f.gap[f.gaps++] = (Pair){reach, lo};
            if (f.sized) fit_insert(&f, (Pair){lo - reach, reach});
        }
        if (hi > reach) reach = hi;
    }
    f.gap[f.gaps++] = (Pair){reach, TOP};
    for (int64_t a = 0, b = f.gaps - 1; a < b; a++, b--) { /* then highest first */
        Pair swap = f.gap[a];
        f.gap[a] = f.gap[b];
        f.gap[b] = swap;
    }
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
            if (s->extent[done]) fl_give(&f, s->base[done], s->base[done] + s->extent[done]);
        }
        if (!s->extent[u]) continue;
        s->base[u] = fl_take(&f, s->extent[u], s->residue[u], s->modulus[u], s->best);
        if (s->base[u] + s->extent[u] > peak) peak = s->base[u] + s->extent[u];
    }
    free(f.gap); free(f.fit);
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
