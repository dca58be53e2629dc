/* Placement of an order of units against an interval structure over time: what the compiled
 * passes share (memplan.heuristics.compiled_place: `place`; memplan.heuristics.anneal: the
 * search). No pair lists: memory O(n) whatever the overlap (10M+ pairs on training steps).
 *
 *   address
 *     ^        placed partner j           the unit's base may not lie in
 *     |     [====off[j], off[j]+size[j])  (off[j] - rel - size, off[j] + size[j] - rel)
 *     |  [..gap..)      [....gap....)     for each member (rel, size) it meets in time
 *     +-------------------------------> base
 *
 * Which placed buffers a member i meets in time: those that start before i ends (a prefix
 * of the buffers sorted by start) and end after i starts. A max-tree over that sorted order
 * holds the end of every placed buffer (nothing for the others), so one descent reports
 * exactly the placed partners, pruning every subtree whose latest end is <= start[i].
 *
 * On small problems (SCAN_BUFFERS) and dense ones (a buffer meets more than n / 16 others)
 * a scan of the placed buffers, kept sorted by (offset, size), is cheaper: O(p) a unit for
 * p placed, no descent and no sort (the spans come out sorted).
 *
 * Steps of `decode`:
 * - the units of order[0:prefix] keep their bases (an order search re-places a suffix);
 *   pinned units are placed first; the tree is filled from them bottom-up, O(n);
 * - each next unit: per member, the forbidden base intervals of its placed partners (the
 *   descent, then its explicit conflicts), sorted by (lo, hi); a sweep for the gap: the
 *   first that fits (first fit) or the tightest that fits, the first of equals (best fit);
 *   none: on top of the highest; the base aligned (base % modulus == residue); the
 *   members enter the tree;
 * - a deadline: every CLOCK_EVERY units the clock is read; past it, every unit left is
 *   stacked on the peak (still a valid plan) and counted as cut;
 * - Ctrl-C: in the thread that imported the kernel (Python's main thread, which runs the
 *   signal handlers), every SIGNAL_SECONDS the GIL is taken for Python's pending signal
 *   handlers (`signalled`); one that raises (memplan's Ctrl-C handler: KeyboardInterrupt)
 *   ends the pass at once, INTERRUPTED returned and the exception set. A pass of a second
 *   or more (30k buffers, a quarter of a core beside busy processes) then ends within
 *   ~50 ms of a Ctrl-C instead of at its end.
 *
 * Cost: per unit O((k + 1) log n + k log k) for k placed partners: O(E log n) in all for E
 * overlapping pairs (the scan: O(n^2)); memory O(n + C) for C explicit conflicts.
 */
#ifndef MEMPLAN_INTERVAL_PLACE_H
#define MEMPLAN_INTERVAL_PLACE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLOCK_EVERY 64
#define SIGNAL_SECONDS 0.05 /* how often a pass in the main thread runs the signal handlers */
#define INTERRUPTED (-2)    /* what `decode` returns when a signal handler raised */
#define EMPTY INT64_MIN
#define SCAN_BUFFERS 2000 /* up to this many buffers, a scan of the placed ones is faster */
#define SCAN_DENSITY 32   /* ... and when pairs x this >= n^2 (a buffer meets n/16 others) */

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

/* The base that fits among k forbidden intervals sorted by (lo, hi): best fit or lowest. */
static int64_t choose_gap(const Span *s, int64_t k, int64_t residue, int64_t modulus,
                          int best) {
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

/* The problem's columns (borrowed) and the structures a pass builds from them (owned). */
typedef struct {
    int64_t n, units, nconf;
    const int64_t *size, *start, *end, *unit_of, *rel, *member_ptr, *members;
    const int64_t *extent, *residue, *modulus, *pinned_base, *by_start, *conflicts;
    int64_t *rank;      /* per buffer: its position in by_start */
    int64_t *before;    /* per buffer: how many buffers start before it ends */
    int64_t *cptr, *cpartner; /* explicit conflicts, CSR per buffer */
    int64_t leaves, *tree;    /* max end of the placed buffers, over by_start positions */
    int scan;                 /* small problems: partners by a scan of `by_offset` instead */
    int64_t *by_offset, placed; /* the placed buffers by (offset, size), for the scan */
    int64_t *offset;          /* per buffer, once placed */
    Span *spans;
    int64_t room;
    double signals_next;      /* when `signalled` next runs the signal handlers */
} Geometry;

/* The thread that imported the kernel, set by its module's init: Python's main thread,
 * where signal handlers run (a kernel imported elsewhere: no pass is interrupted). */
static unsigned long signals_thread;

static void geometry_free(Geometry *g) {
    free(g->rank); free(g->before); free(g->cptr); free(g->cpartner); free(g->tree);
    free(g->offset); free(g->spans); free(g->by_offset);
    g->rank = g->before = g->cptr = g->cpartner = g->tree = g->offset = g->by_offset = NULL;
    g->spans = NULL;
}

/* The owned structures of g (its columns set): 0, or -1 when out of memory. O(n log n + C). */
static int geometry_build(Geometry *g) {
    int64_t n = g->n, one = n ? n : 1;
    g->leaves = 1;
    while (g->leaves < n) g->leaves *= 2;
    g->rank = malloc(sizeof(int64_t) * (size_t)one);
    g->before = malloc(sizeof(int64_t) * (size_t)one);
    g->cptr = calloc((size_t)n + 1, sizeof(int64_t));
    g->cpartner = malloc(sizeof(int64_t) * (size_t)(2 * g->nconf + 1));
    g->tree = malloc(sizeof(int64_t) * (size_t)(2 * g->leaves));
    g->offset = calloc((size_t)one, sizeof(int64_t));
    g->by_offset = malloc(sizeof(int64_t) * (size_t)one);
    g->room = 64;
    g->spans = malloc(sizeof(Span) * (size_t)g->room);
    if (!g->rank || !g->before || !g->cptr || !g->cpartner || !g->tree || !g->offset
        || !g->spans || !g->by_offset) {
        geometry_free(g);
        return -1;
    }
    for (int64_t a = 0; a < n; a++) g->rank[g->by_start[a]] = a;
    double pairs = 0;
    for (int64_t i = 0; i < n; i++) { /* the first position whose start is >= end[i] */
        int64_t lo = 0, hi = n;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (g->start[g->by_start[mid]] < g->end[i]) lo = mid + 1;
            else hi = mid;
        }
        g->before[i] = lo;
        if (lo > g->rank[i] + 1) pairs += (double)(lo - g->rank[i] - 1);
    }
    /* a scan looks at every placed buffer, a descent at the partners (log n each, and a
     * sort): the scan wins on small problems and where a buffer meets many of the others */
    g->scan = n <= SCAN_BUFFERS || pairs * SCAN_DENSITY >= (double)n * (double)n;
    for (int64_t c = 0; c < g->nconf; c++) {
        g->cptr[g->conflicts[2 * c] + 1]++;
        g->cptr[g->conflicts[2 * c + 1] + 1]++;
    }
    for (int64_t i = 0; i < n; i++) g->cptr[i + 1] += g->cptr[i];
    int64_t *fill = malloc(sizeof(int64_t) * (size_t)one);
    if (!fill) { geometry_free(g); return -1; }
    memcpy(fill, g->cptr, sizeof(int64_t) * (size_t)n);
    for (int64_t c = 0; c < g->nconf; c++) {
        int64_t i = g->conflicts[2 * c], j = g->conflicts[2 * c + 1];
        g->cpartner[fill[i]++] = j;
        g->cpartner[fill[j]++] = i;
    }
    free(fill);
    return 0;
}

static void tree_insert(Geometry *g, int64_t j) {
    int64_t node = g->leaves + g->rank[j];
    g->tree[node] = g->end[j];
    for (node /= 2; node >= 1; node /= 2) {
        int64_t l = g->tree[2 * node], r = g->tree[2 * node + 1], top = l > r ? l : r;
        if (g->tree[node] == top) break;
        g->tree[node] = top;
    }
}

static int add_span(Geometry *g, int64_t k, int64_t lo, int64_t hi) {
    if (k >= g->room) {
        Span *grown = realloc(g->spans, sizeof(Span) * (size_t)(2 * g->room));
        if (!grown) return -1;
        g->spans = grown;
        g->room *= 2;
    }
    g->spans[k].lo = lo;
    g->spans[k].hi = hi;
    return 0;
}

/* Adds the spans of the placed buffers at by_start positions [l, r) below `node` that end
 * after `after` and start before position `limit`; the new count, or -1 (out of memory). */
static int64_t descend(Geometry *g, int64_t node, int64_t l, int64_t r, int64_t limit,
                       int64_t after, int64_t reach, int64_t rel, int64_t k) {
    if (l >= limit || g->tree[node] <= after) return k;
    if (r - l == 1) {
        int64_t j = g->by_start[l];
        if (add_span(g, k, g->offset[j] - reach, g->offset[j] + g->size[j] - rel)) return -1;
        return k + 1;
    }
    int64_t mid = (l + r) / 2;
    k = descend(g, 2 * node, l, mid, limit, after, reach, rel, k);
    if (k < 0) return k;
    return descend(g, 2 * node + 1, mid, r, limit, after, reach, rel, k);
}

/* Whether placed buffer a lies below b: by (offset, size), the order of their spans. */
static int lower(const Geometry *g, int64_t a, int64_t b) {
    if (g->offset[a] != g->offset[b]) return g->offset[a] < g->offset[b];
    return g->size[a] < g->size[b];
}

/* Buffer j into the scan's list of placed buffers by (offset, size): O(log p + p). */
static void scan_insert(Geometry *g, int64_t j) {
    int64_t lo = 0, hi = g->placed;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (lower(g, g->by_offset[mid], j)) lo = mid + 1;
        else hi = mid;
    }
    memmove(g->by_offset + lo + 1, g->by_offset + lo, sizeof(int64_t) * (size_t)(g->placed - lo));
    g->by_offset[lo] = j;
    g->placed++;
}

/* Adds the spans of member mb's placed partners in time: a descent of the tree, or on small
 * problems a scan of the placed buffers by offset (spans come out sorted); the new count. */
static int64_t time_partners(Geometry *g, int64_t mb, int64_t k) {
    int64_t rel = g->rel[mb], reach = rel + g->size[mb] - 1;
    if (!g->scan) return descend(g, 1, 0, g->leaves, g->before[mb], g->start[mb], reach, rel, k);
    int64_t start = g->start[mb], end = g->end[mb];
    for (int64_t q = 0; q < g->placed; q++) {
        int64_t j = g->by_offset[q];
        if (g->start[j] >= end || g->end[j] <= start) continue;
        if (add_span(g, k++, g->offset[j] - reach, g->offset[j] + g->size[j] - rel)) return -1;
    }
    return k;
}

/* The base unit u gets among the placed buffers; -1 when out of memory. */
static int64_t unit_base(Geometry *g, int64_t u, int best) {
    int64_t k = 0;
    int sorted = g->scan && g->member_ptr[u + 1] - g->member_ptr[u] == 1;
    for (int64_t q = g->member_ptr[u]; q < g->member_ptr[u + 1]; q++) {
        int64_t mb = g->members[q], rel = g->rel[mb], reach = rel + g->size[mb] - 1;
        k = time_partners(g, mb, k);
        if (k < 0) return -1;
        for (int64_t e = g->cptr[mb]; e < g->cptr[mb + 1]; e++) {
            int64_t j = g->cpartner[e];
            if (g->tree[g->leaves + g->rank[j]] == EMPTY) continue;
            if (add_span(g, k++, g->offset[j] - reach, g->offset[j] + g->size[j] - rel))
                return -1;
            sorted = 0;
        }
    }
    if (!sorted) qsort(g->spans, (size_t)k, sizeof(Span), by_lo);
    return choose_gap(g->spans, k, g->residue[u], g->modulus[u], best);
}

/* Unit u at base: its members' offsets; with `insert`, into the tree and the scan's list
 * (without, the caller fills the tree bottom-up). */
static void settle(Geometry *g, int64_t u, int64_t base, int insert) {
    for (int64_t q = g->member_ptr[u]; q < g->member_ptr[u + 1]; q++) {
        int64_t mb = g->members[q];
        g->offset[mb] = base + g->rel[mb];
        if (insert) {
            tree_insert(g, mb);
        } else {
            g->tree[g->leaves + g->rank[mb]] = g->end[mb];
            g->by_offset[g->placed++] = mb;
        }
        if (insert && g->scan) scan_insert(g, mb);
    }
}

typedef struct { int64_t offset, size, buffer; } Placed;

static int by_place(const void *a, const void *b) {
    const Placed *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    return 0;
}

/* The scan's list of the buffers placed so far, sorted by (offset, size): 0 or -1. */
static int sort_placed(Geometry *g) {
    Placed *key = malloc(sizeof(Placed) * (size_t)(g->placed ? g->placed : 1));
    if (!key) return -1;
    for (int64_t q = 0; q < g->placed; q++) {
        int64_t j = g->by_offset[q];
        key[q] = (Placed){g->offset[j], g->size[j], j};
    }
    qsort(key, (size_t)g->placed, sizeof(Placed), by_place);
    for (int64_t q = 0; q < g->placed; q++) g->by_offset[q] = key[q].buffer;
    free(key);
    return 0;
}

/* Whether a Python signal handler raised (Ctrl-C), run every SIGNAL_SECONDS in the thread
 * that handles signals, the GIL taken for it (the caller released it); the exception stays
 * set for the caller to return. */
static int signalled(Geometry *g) {
    if (PyThread_get_thread_ident() != signals_thread) return 0;
    double t = now();
    if (t < g->signals_next) return 0;
    g->signals_next = t + SIGNAL_SECONDS;
    PyGILState_STATE state = PyGILState_Ensure();
    int raised = PyErr_CheckSignals() < 0;
    PyGILState_Release(state);
    return raised;
}

/* Places order[prefix:] (the units before keep base[]); base[] out per unit. The peak, -1
 * when out of memory, INTERRUPTED when a signal handler raised (`signalled`: base[]
 * unfinished); *cut: the units stacked past the deadline (timed). A search that
 * wants no peak above `limit` learns early: the pass stops once it is passed (a peak above
 * `limit` returned, base[] unfinished). */
static int64_t decode(Geometry *g, const int64_t *order, int64_t m, int64_t prefix,
                      int64_t *base, int best, int timed, double deadline, int64_t *cut,
                      int64_t limit) {
    int64_t peak = 0;
    *cut = 0;
    for (int64_t i = 0; i < 2 * g->leaves; i++) g->tree[i] = EMPTY;
    g->placed = 0;
    for (int64_t u = 0; u < g->units; u++) {
        if (g->pinned_base[u] < 0) continue;
        base[u] = g->pinned_base[u];
        settle(g, u, base[u], 0);
        if (base[u] + g->extent[u] > peak) peak = base[u] + g->extent[u];
    }
    for (int64_t c = 0; c < prefix; c++) {
        int64_t u = order[c];
        settle(g, u, base[u], 0);
        if (base[u] + g->extent[u] > peak) peak = base[u] + g->extent[u];
    }
    for (int64_t node = g->leaves - 1; node >= 1; node--) {
        int64_t l = g->tree[2 * node], r = g->tree[2 * node + 1];
        g->tree[node] = l > r ? l : r;
    }
    if (g->scan && sort_placed(g)) return -1;
    *cut = 0;
    for (int64_t c = prefix; c < m; c++) {
        int64_t u = order[c], at;
        if (!*cut && (c - prefix) % CLOCK_EVERY == 0) {
            if (timed && now() > deadline) *cut = m - c;
            else if (signalled(g)) return INTERRUPTED;
        }
        if (*cut) {
            at = aligned(peak, g->residue[u], g->modulus[u]);
        } else {
            at = unit_base(g, u, best);
            if (at < 0) return -1;
        }
        base[u] = at;
        settle(g, u, at, 1);
        if (at + g->extent[u] > peak) peak = at + g->extent[u];
        if (peak > limit) break;
    }
    return peak;
}

#endif
