/* The overlap sweep of memplan.validate in C: whether any two buffers live together share
 * bytes that their aliases do not let them share. Written apart from every planner's code
 * (nothing shared with the placement kernels), so that the check stays independent.
 *
 *   address
 *     ^      tidy: live, pairwise disjoint,    messy: live buffers that overlap
 *     |      sorted by offset                  another live one (aliases, or a fault)
 *     |   [a)  [b)      [c)                    [d) [e)
 *     +-------------------------------------> address, at one moment
 *
 * The same sweep as validate._overlaps, which lists the violations; this one only says
 * whether there is one, without Python's cost per event (3 us: 6 s at 10^6 buffers):
 * - events in time order, ends before starts at one time point (half-open lifetimes);
 * - an end takes its buffer out of tidy (a Fenwick tree of counts over the buffers ranked
 *   by offset) or messy;
 * - a start finds what it touches: its neighbours in tidy (a new buffer can only touch
 *   the ones next to its offset: tidy is disjoint) and every messy buffer; none: it joins
 *   tidy; else it joins messy, and each buffer it touches is a violation unless both have
 *   one label (joined by mandatory aliases) or their labels are linked (an optional alias).
 *
 * Cost: O(n log n + n * a) for at most a messy buffers live at once (a sorted array of the
 * tidy ones cost O(live) a move: 120 CPU-s on a 10^6-buffer decoder, 40k-140k live at once);
 * memory O(n).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

/* The buffers ranked by (offset, index): a tidy buffer is its rank in a Fenwick tree of
 * counts, so that an insertion, a removal and the k-th live buffer by offset each take
 * O(log n), whatever number of buffers is live. */
typedef struct { int64_t lo, idx; } Ranked; /* a buffer's offset, its index */

static int by_offset(const void *x, const void *y) {
    const Ranked *a = x, *b = y;
    if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

static void count_add(int64_t *tree, int64_t n, int64_t rank, int64_t delta) {
    for (int64_t i = rank + 1; i <= n; i += i & -i) tree[i] += delta;
}

/* How many live tidy buffers rank below ``rank``. */
static int64_t count_below(const int64_t *tree, int64_t rank) {
    int64_t total = 0;
    for (int64_t i = rank; i > 0; i -= i & -i) total += tree[i];
    return total;
}

/* The rank of the k-th live tidy buffer (k from 1). */
static int64_t kth(const int64_t *tree, int64_t n, int64_t k) {
    int64_t at = 0, step = 1;
    while (step * 2 <= n) step *= 2;
    for (; step; step /= 2)
        if (at + step <= n && tree[at + step] < k) {
            at += step;
            k -= tree[at];
        }
    return at;
}

/* Whether the sorted keys hold key. */
static int holds(const int64_t *keys, int64_t n, int64_t key) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && keys[lo] == key;
}

typedef struct {
    int64_t n, events, nlinks, width;
    const int64_t *low, *high, *label, *buffer, *links;
    const int8_t *starting;
} Columns;

/* 1: some pair may not share and does; 0: none; -1: out of memory. */
static int sweep(const Columns *c) {
    int64_t n = c->n;
    Ranked *order = malloc(sizeof(Ranked) * (size_t)(n + 1));
    int64_t *by_rank = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *rank = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *tree = calloc((size_t)n + 1, sizeof(int64_t));
    int64_t *messy = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t *where = malloc(sizeof(int64_t) * (size_t)(n + 1)); /* messy slot, or -1 */
    int8_t *in_tidy = calloc((size_t)n + 1, 1);
    int64_t *touching = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int found = -1;
    if (!order || !by_rank || !rank || !tree || !messy || !where || !in_tidy || !touching) goto done;
    for (int64_t i = 0; i < n; i++) order[i] = (Ranked){c->low[i], i};
    qsort(order, (size_t)n, sizeof(Ranked), by_offset);
    for (int64_t r = 0; r < n; r++) {
        by_rank[r] = order[r].idx;
        rank[order[r].idx] = r;
    }
    for (int64_t i = 0; i < n; i++) where[i] = -1;
    int64_t live = 0, messes = 0;
    found = 0;
    for (int64_t e = 0; e < c->events && !found; e++) {
        int64_t b = c->buffer[e], lo = c->low[b], hi = c->high[b];
        if (!c->starting[e]) {
            if (in_tidy[b]) {
                count_add(tree, n, rank[b], -1);
                live--;
                in_tidy[b] = 0;
            } else if (where[b] >= 0) {
                int64_t last = messy[--messes];
                messy[where[b]] = last;
                where[last] = where[b];
                where[b] = -1;
            }
            continue;
        }
        int64_t k = 0, below = count_below(tree, rank[b]);
        for (int64_t left = below; left >= 1; left--) { /* disjoint: ends rise with offsets */
            int64_t other = by_rank[kth(tree, n, left)];
            if (c->high[other] <= lo) break;
            touching[k++] = other;
        }
        for (int64_t right = below + 1; right <= live; right++) {
            int64_t other = by_rank[kth(tree, n, right)];
            if (c->low[other] >= hi) break;
            touching[k++] = other;
        }
        for (int64_t q = 0; q < messes; q++)
            if (c->low[messy[q]] < hi && lo < c->high[messy[q]]) touching[k++] = messy[q];
        if (!k) {
            count_add(tree, n, rank[b], 1);
            live++;
            in_tidy[b] = 1;
            continue;
        }
        where[b] = messes;
        messy[messes++] = b;
        for (int64_t q = 0; q < k && !found; q++) {
            int64_t g = c->label[touching[q]], h = c->label[b];
            int64_t key = g < h ? g * c->width + h : h * c->width + g;
            found = g != h && !holds(c->links, c->nlinks, key);
        }
    }
done:
    free(order); free(by_rank); free(rank); free(tree); free(messy); free(where); free(in_tidy);
    free(touching);
    return found;
}

static PyObject *any_overlap(PyObject *self, PyObject *args) {
    Py_buffer b[6];
    long long width;
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*L", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                          &width))
        return NULL;
    PyObject *result = NULL;
    Columns c = {b[0].len / 8, b[3].len / 8, b[5].len / 8, width, b[0].buf, b[1].buf,
                 b[2].buf, b[3].buf, b[5].buf, b[4].buf};
    int ok = b[0].len % 8 == 0 && b[1].len == b[0].len && b[2].len == b[0].len
             && b[3].len % 8 == 0 && b[4].len == b[3].len / 8 && b[5].len % 8 == 0;
    for (int64_t e = 0; ok && e < c.events; e++)
        ok = c.buffer[e] >= 0 && c.buffer[e] < c.n;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "any_overlap: arrays of the wrong lengths or values");
        goto release;
    }
    int found;
    Py_BEGIN_ALLOW_THREADS
    found = sweep(&c);
    Py_END_ALLOW_THREADS
    if (found < 0) PyErr_NoMemory();
    else result = PyBool_FromLong(found);
release:
    for (int i = 0; i < 6; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"any_overlap", any_overlap, METH_VARARGS,
     "any_overlap(low, high, label, buffer, starting, links, width) -> bool; see "
     "memplan.validate"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_validate_kernel",
                                    "The overlap sweep of memplan.validate.", -1, methods};

PyMODINIT_FUNC PyInit__validate_kernel(void) { return PyModule_Create(&module); }
