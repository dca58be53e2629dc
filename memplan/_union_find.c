/* memplan.problem.union_find in C: the same weighted union-find, step for step, without
 * Python's cost per edge (about 2 us: 2 CPU-s for the aliases of a 10^6-buffer decoder).
 *
 * Items 0..n-1 carry unknowns x; an edge (a, b, d) says x[b] == x[a] + d. Edges are taken
 * in order: one whose two items are already joined, with another difference, contradicts
 * the ones before it and is left out. Path halving keeps the chains short:
 *
 *   parent  i -> g -> r     becomes   i -> r   (to_parent[i] += to_parent[g])
 *
 * The results are those of the Python loop bit for bit (same roots, same order of
 * merging), so every caller gets the same groups whichever runs. Differences are int64;
 * a sum that would overflow makes the call fail (OverflowError), and the caller runs the
 * Python loop, whose integers do not overflow. Cost: O((n + e) log n); memory O(n).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

/* The root of i and x[i] - x[root], halving the path on the way; -1 on overflow. */
static int find(int64_t *parent, int64_t *to_parent, int64_t i, int64_t *root,
                int64_t *total) {
    int64_t sum = 0;
    while (parent[i] != i) {
        int64_t grand = parent[i];
        if (parent[grand] != grand) {
            if (__builtin_add_overflow(to_parent[i], to_parent[grand], &to_parent[i]))
                return -1;
            parent[i] = parent[grand];
            continue;
        }
        if (__builtin_add_overflow(sum, to_parent[i], &sum)) return -1;
        i = grand;
    }
    *root = i;
    *total = sum;
    return 0;
}

static PyObject *union_find(PyObject *self, PyObject *args) {
    Py_buffer b[3];
    long long n;
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "Ly*y*y*", &n, &b[0], &b[1], &b[2])) return NULL;
    PyObject *result = NULL;
    int64_t edges = b[0].len / 8;
    const int64_t *a = b[0].buf, *bb = b[1].buf, *d = b[2].buf;
    int ok = n >= 0 && b[0].len % 8 == 0 && b[1].len == b[0].len && b[2].len == b[0].len;
    for (int64_t j = 0; ok && j < edges; j++)
        ok = a[j] >= 0 && a[j] < n && bb[j] >= 0 && bb[j] < n;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "union_find: arrays of the wrong lengths or values");
        goto release;
    }
    PyObject *roots = PyBytes_FromStringAndSize(NULL, n * 8);
    PyObject *deltas = PyBytes_FromStringAndSize(NULL, n * 8);
    PyObject *against = PyBytes_FromStringAndSize(NULL, edges * 8);
    if (!roots || !deltas || !against) goto fail;
    int64_t *parent = (int64_t *)PyBytes_AS_STRING(roots);
    int64_t *to_parent = (int64_t *)PyBytes_AS_STRING(deltas);
    int64_t *contradicting = (int64_t *)PyBytes_AS_STRING(against);
    int64_t count = 0, overflow = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++) { parent[i] = i; to_parent[i] = 0; }
    for (int64_t j = 0; j < edges && !overflow; j++) {
        int64_t ra, da, rb, db, joined;
        if (find(parent, to_parent, a[j], &ra, &da) || find(parent, to_parent, bb[j], &rb, &db)
                || __builtin_add_overflow(da, d[j], &joined)) {
            overflow = 1;
            break;
        }
        if (ra == rb) {
            if (db != joined) contradicting[count++] = j;
            continue;
        }
        parent[rb] = ra; /* x[rb] = x[b] - db = x[a] + d - db */
        overflow = __builtin_sub_overflow(joined, db, &to_parent[rb]);
    }
    /* every item to its root: the Python loop's final pass, the same halving */
    for (int64_t i = 0; i < n && !overflow; i++) {
        int64_t r = i, t = 0;
        overflow = find(parent, to_parent, i, &r, &t) != 0;
        parent[i] = r; /* still x[i] - x[r]: a later find through i sums the same */
        to_parent[i] = t;
    }
    Py_END_ALLOW_THREADS
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "union_find: a difference beyond int64");
        goto fail;
    }
    if (_PyBytes_Resize(&against, count * 8) < 0) goto fail;
    result = Py_BuildValue("NNN", roots, deltas, against);
    goto release;
fail:
    Py_XDECREF(roots);
    Py_XDECREF(deltas);
    Py_XDECREF(against);
release:
    for (int i = 0; i < 3; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"union_find", union_find, METH_VARARGS,
     "union_find(n, a, b, d) -> (root, to_root, contradicting) as int64 bytes; see "
     "memplan.problem.union_find"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_union_find",
                                    "memplan.problem's union-find in C.", -1, methods};

PyMODINIT_FUNC PyInit__union_find(void) { return PyModule_Create(&module); }
