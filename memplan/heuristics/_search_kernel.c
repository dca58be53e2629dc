/* The order search of memplan.heuristics.anneal in C: simulated annealing over placement
 * orders, each order decoded by best fit or first fit against the interval structure of
 * _interval_place.h (no pair lists), its arena the cost.
 *
 *   order:   u7 u2 u9 u4 | u1 u8 u3 ...     a peak unit (its top reaches the arena) moves
 *                  ^-----------'            earlier, by a swap or an insertion; the units
 *            kept (prefix) | placed again   before the first changed position keep their
 *                                           bases, only the suffix is placed again
 *
 * Steps of one `run` (a slice of the search: Python calls it until the time limit, so that
 * Ctrl-C stops the search between two slices with the best order kept):
 * - pick a unit: one whose top reaches the current arena, or (chance `explore`) any;
 * - move it to a random earlier position: swapped with the unit there, or inserted before
 *   it (half each); at position 0, swapped with any;
 * - decode the new order from the first changed position; keep it when its arena is no
 *   larger, or a larger one with chance exp(-increase / (temperature * arena * (1 - p)))
 *   for p the search's progress (0 to 1, time or evaluations);
 * - the best order ever seen is kept; after `restart` evaluations without a new best,
 *   the walk goes back to it (iterated local search);
 * - stop at the slice's end (seconds or evaluations), or when the best arena reaches the
 *   lower bound.
 *
 * Cost: one decode per evaluation, about half a pass on average (the suffix). State lives
 * in a capsule between slices; memory O(n + C). Seeded (xorshift64*): the same seed and
 * evaluation budget give the same orders.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include "_interval_place.h"

#define COLUMNS 13

typedef struct {
    Geometry g;
    int64_t *column[COLUMNS]; /* owned copies of the problem's columns */
    int64_t m, units, bound;
    int64_t *cur, *cand, *best;      /* orders of the m free units */
    int64_t *cur_base, *cand_base, *best_base; /* per unit */
    int64_t *peak;                   /* scratch: positions of the units at the arena */
    int64_t *near;                   /* scratch: positions of the units a moved one meets */
    int64_t *ustart, *uend;          /* per unit: its span in time */
    int64_t cur_arena, best_arena, evaluations, since_best;
    int best_fit;
    uint64_t rng;
} Search;

static uint64_t next_random(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 2685821657736338717ULL;
}

static double uniform(uint64_t *s) { return (double)(next_random(s) >> 11) / 9007199254740992.0; }

static int64_t below(uint64_t *s, int64_t n) { return (int64_t)(next_random(s) % (uint64_t)n); }

static void search_free(Search *s) {
    geometry_free(&s->g);
    for (int i = 0; i < COLUMNS; i++) free(s->column[i]);
    free(s->cur); free(s->cand); free(s->best);
    free(s->cur_base); free(s->cand_base); free(s->best_base); free(s->peak);
    free(s->near); free(s->ustart); free(s->uend);
    free(s);
}

static void capsule_free(PyObject *capsule) {
    Search *s = PyCapsule_GetPointer(capsule, "memplan.search");
    if (s) search_free(s);
}

/* The positions of the units whose top reaches the current arena; their count. */
static int64_t at_peak(Search *s) {
    int64_t k = 0;
    for (int64_t c = 0; c < s->m; c++) {
        int64_t u = s->cur[c];
        if (s->cur_base[u] + s->g.extent[u] >= s->cur_arena) s->peak[k++] = c;
    }
    return k;
}

/* A neighbour of cur in cand; the first position where they differ. */
static int64_t neighbour(Search *s, int64_t peaks, double explore) {
    int64_t m = s->m, at, to;
    at = (peaks && uniform(&s->rng) >= explore) ? s->peak[below(&s->rng, peaks)]
                                                 : below(&s->rng, m);
    memcpy(s->cand, s->cur, sizeof(int64_t) * (size_t)m);
    if (at == 0) {
        to = 1 + below(&s->rng, m - 1);
        s->cand[0] = s->cur[to];
        s->cand[to] = s->cur[0];
        return 0;
    }
    /* before a unit placed earlier that it meets in time (one that can be in its way) */
    int64_t u = s->cur[at], k = 0;
    for (int64_t c = 0; c < at; c++) {
        int64_t v = s->cur[c];
        if (s->ustart[v] < s->uend[u] && s->ustart[u] < s->uend[v]) s->near[k++] = c;
    }
    to = k ? s->near[below(&s->rng, k)] : below(&s->rng, at);
    if (uniform(&s->rng) < 0.5) {
        s->cand[at] = s->cur[to];
        s->cand[to] = s->cur[at];
    } else {
        memmove(s->cand + to + 1, s->cur + to, sizeof(int64_t) * (size_t)(at - to));
        s->cand[to] = s->cur[at];
    }
    return to;
}

static void keep_best(Search *s) {
    s->best_arena = s->cur_arena;
    memcpy(s->best, s->cur, sizeof(int64_t) * (size_t)s->m);
    memcpy(s->best_base, s->cur_base, sizeof(int64_t) * (size_t)s->units);
    s->since_best = 0;
}

/* One slice (see the file's doc): 0, -1 when out of memory, INTERRUPTED at Ctrl-C. */
static int search_run(Search *s, int64_t budget, double seconds, double deadline_seconds,
                      double progress0, double progress1, double temperature, double explore,
                      int64_t restart) {
    double began = now(), end = began + seconds, deadline = began + deadline_seconds;
    int64_t done = 0, peaks = at_peak(s), cut = 0;
    while (s->m >= 2 && s->best_arena > s->bound) {
        double t = now();
        if ((budget >= 0 && done >= budget) || (budget < 0 && t >= end)) break;
        double f = budget >= 0 ? (double)done / (double)(budget ? budget : 1)
                               : (t - began) / (seconds > 0 ? seconds : 1);
        double progress = progress0 + (progress1 - progress0) * f;
        if (s->since_best >= restart) { /* back to the best order */
            memcpy(s->cur, s->best, sizeof(int64_t) * (size_t)s->m);
            memcpy(s->cur_base, s->best_base, sizeof(int64_t) * (size_t)s->units);
            s->cur_arena = s->best_arena;
            s->since_best = 0;
            peaks = at_peak(s);
        }
        int64_t prefix = neighbour(s, peaks, explore);
        memcpy(s->cand_base, s->cur_base, sizeof(int64_t) * (size_t)s->units);
        /* the annealing rule drawn first: the largest arena it accepts; a pass that gets
         * above it stops there (most moves are refused: they cost a fraction of a pass) */
        double heat = temperature * (double)s->cur_arena * (1 - progress);
        double slack = heat > 0 ? -heat * log(1 - uniform(&s->rng)) : 0;
        int64_t limit = s->cur_arena + (int64_t)(slack < 1e18 ? slack : 1e18);
        int64_t arena = decode(&s->g, s->cand, s->m, prefix, s->cand_base, s->best_fit,
                               deadline_seconds >= 0, deadline, &cut, limit);
        if (arena < 0) return arena == INTERRUPTED ? INTERRUPTED : -1;
        if (cut) break; /* the time limit passed mid-pass: this order is not finished */
        done++;
        s->evaluations++;
        s->since_best++;
        if (arena <= limit) {
            int64_t *swap = s->cur;
            s->cur = s->cand;
            s->cand = swap;
            swap = s->cur_base;
            s->cur_base = s->cand_base;
            s->cand_base = swap;
            s->cur_arena = arena;
            peaks = at_peak(s);
            if (arena < s->best_arena) keep_best(s);
        }
    }
    return 0;
}

static int64_t *copied(const Py_buffer *b) {
    int64_t *copy = malloc((size_t)(b->len ? b->len : 1));
    if (copy) memcpy(copy, b->buf, (size_t)b->len);
    return copy;
}

static PyObject *search_new(PyObject *self, PyObject *args) {
    Py_buffer b[COLUMNS + 1];
    int best_fit;
    long long bound;
    unsigned long long seed;
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*y*iLK", &b[0], &b[1], &b[2], &b[3],
                          &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12],
                          &b[13], &best_fit, &bound, &seed))
        return NULL;
    PyObject *result = NULL;
    Search *s = calloc(1, sizeof(Search));
    if (!s) { PyErr_NoMemory(); goto release; }
    int ok = 1;
    for (int i = 0; i < COLUMNS; i++) ok = ok && (s->column[i] = copied(&b[i])) != NULL;
    Geometry *g = &s->g;
    int64_t **c = s->column;
    g->size = c[0]; g->start = c[1]; g->end = c[2]; g->unit_of = c[3]; g->rel = c[4];
    g->member_ptr = c[5]; g->members = c[6]; g->extent = c[7]; g->residue = c[8];
    g->modulus = c[9]; g->pinned_base = c[10]; g->by_start = c[11]; g->conflicts = c[12];
    g->n = b[0].len / (Py_ssize_t)sizeof(int64_t);
    g->units = s->units = b[7].len / (Py_ssize_t)sizeof(int64_t);
    g->nconf = b[12].len / (Py_ssize_t)(2 * sizeof(int64_t));
    s->m = b[13].len / (Py_ssize_t)sizeof(int64_t);
    size_t orders = sizeof(int64_t) * (size_t)(s->m ? s->m : 1);
    size_t bases = sizeof(int64_t) * (size_t)(s->units ? s->units : 1);
    s->cur = malloc(orders); s->cand = malloc(orders); s->best = malloc(orders);
    s->peak = malloc(orders);
    s->near = malloc(orders);
    s->ustart = malloc(bases); s->uend = malloc(bases);
    s->cur_base = calloc(1, bases); s->cand_base = calloc(1, bases);
    s->best_base = calloc(1, bases);
    if (!ok || !s->cur || !s->cand || !s->best || !s->peak || !s->near || !s->ustart
        || !s->uend || !s->cur_base || !s->cand_base || !s->best_base || geometry_build(g)) {
        search_free(s);
        PyErr_NoMemory();
        goto release;
    }
    memcpy(s->cur, b[13].buf, (size_t)b[13].len);
    for (int64_t u = 0; u < s->units; u++) {
        s->ustart[u] = INT64_MAX;
        s->uend[u] = INT64_MIN;
        for (int64_t q = g->member_ptr[u]; q < g->member_ptr[u + 1]; q++) {
            int64_t mb = g->members[q];
            if (g->start[mb] < s->ustart[u]) s->ustart[u] = g->start[mb];
            if (g->end[mb] > s->uend[u]) s->uend[u] = g->end[mb];
        }
    }
    s->best_fit = best_fit;
    s->bound = bound;
    s->rng = (uint64_t)seed * 0x9E3779B97F4A7C15ULL + 0x2545F4914F6CDD1DULL;
    if (!s->rng) s->rng = 1;
    int64_t cut = 0, arena;
    Py_BEGIN_ALLOW_THREADS
    arena = decode(g, s->cur, s->m, 0, s->cur_base, best_fit, 0, 0.0, &cut, INT64_MAX);
    Py_END_ALLOW_THREADS
    if (arena < 0) { /* out of memory, or Ctrl-C (its error set) */
        search_free(s);
        if (arena != INTERRUPTED) PyErr_NoMemory();
        goto release;
    }
    s->cur_arena = arena;
    keep_best(s);
    result = PyCapsule_New(s, "memplan.search", capsule_free);
    if (!result) search_free(s);
release:
    for (int i = 0; i < COLUMNS + 1; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyObject *search_step(PyObject *self, PyObject *args) {
    PyObject *capsule;
    long long budget, restart;
    double seconds, deadline_seconds, progress0, progress1, temperature, explore;
    if (!PyArg_ParseTuple(args, "OLddddddL", &capsule, &budget, &seconds, &deadline_seconds,
                          &progress0, &progress1, &temperature, &explore, &restart))
        return NULL;
    Search *s = PyCapsule_GetPointer(capsule, "memplan.search");
    if (!s) return NULL;
    int code;
    Py_BEGIN_ALLOW_THREADS
    code = search_run(s, budget, seconds, deadline_seconds, progress0, progress1, temperature,
                      explore, restart < 1 ? 1 : restart);
    Py_END_ALLOW_THREADS
    if (code) return code == INTERRUPTED ? NULL : PyErr_NoMemory(); /* Ctrl-C: its error */
    return Py_BuildValue("(LLL)", (long long)s->best_arena, (long long)s->cur_arena,
                         (long long)s->evaluations);
}

static PyObject *search_best(PyObject *self, PyObject *args) {
    PyObject *capsule;
    if (!PyArg_ParseTuple(args, "O", &capsule)) return NULL;
    Search *s = PyCapsule_GetPointer(capsule, "memplan.search");
    if (!s) return NULL;
    return Py_BuildValue("(y#y#)", (const char *)s->best_base,
                         (Py_ssize_t)(s->units * (Py_ssize_t)sizeof(int64_t)),
                         (const char *)s->best, (Py_ssize_t)(s->m * (Py_ssize_t)sizeof(int64_t)));
}

static PyMethodDef methods[] = {
    {"new", search_new, METH_VARARGS,
     "new(13 columns as compiled_place.kernel_columns, order, best_fit, bound, seed) -> search;"
     " the order decoded once"},
    {"step", search_step, METH_VARARGS,
     "step(search, evaluations, seconds, deadline_seconds, progress0, progress1, temperature,"
     " explore, restart) -> (best arena, current arena, evaluations so far)"},
    {"best", search_best, METH_VARARGS, "best(search) -> (unit bases, order) of the best order"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_search_kernel",
                                    "The order search of memplan.heuristics.anneal.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__search_kernel(void) {
    signals_thread = PyThread_get_thread_ident();
    return PyModule_Create(&module);
}
