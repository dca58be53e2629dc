/* The layout sweep of memplan.deploy.regions_layout compiled: the beam of `sweep_layout`
 * (the same states, merges, ties and work count as its Python twin, which the tests hold
 * equal) without numpy's cost per call, which made the Python sweep's cost mostly per step
 * rather than per state. Python prepares the columns (`kernel_columns` there): the steps,
 * the units' choices, the boxes, and the guide's states sorted for a binary search.
 *
 *   state: per live unit its region and offset (0 in the last region), its cost, its bytes
 *          in the last region, and the node of its choices (parent, unit, region, offset);
 *   step:  ended units leave; each starting unit branches every state; equal states merge
 *          at their least cost (sorted by a hash, then cost); the last region's loads are
 *          checked where a box starts; the states ordered by cost plus the guide's rest,
 *          ties to the widest free range, and the first `max_states` kept.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FAR (INT64_MAX / 4) /* where an absent unit sits (FAR in regions_layout.py) */
#define GRID 8              /* multiples of its own width a unit tries */

typedef struct { /* the states at one point of the sweep */
    int64_t n, live;          /* states, live units (columns) */
    int64_t *region, *offset; /* n x live */
    int64_t *cost, *slow, *node;
} States;

typedef struct { /* the choices made: a tree of nodes, one per branching kept */
    int64_t *parent, *unit, *region, *offset;
    int64_t len, cap;
} Nodes;

typedef struct { /* the columns Python hands over (see sweep's doc) */
    const int64_t *events, *is_box, *ev_ptr, *ev_units, *ends, *extent, *unit_size, *pinned,
        *modulus, *residue, *choice_ptr, *choice_k, *choice_price, *limits, *box_start,
        *box_end, *box_bytes, *box_unit, *g_steps, *g_seen_ptr, *g_seen, *g_state_ptr,
        *g_cell_ptr, *g_states, *g_costs, *price, *mix;
    int64_t n_events, units, regions, boxes, g_n, placed, most, max_states, crowd, max_work,
        horizon;
    double ceiling, deadline; /* deadline: on this file's clock (`now_seconds`) */
} Sweep;

static void states_free(States *s) {
    free(s->region); free(s->offset); free(s->cost); free(s->slow); free(s->node);
    memset(s, 0, sizeof *s);
}

/* ``offsets``: whether the states have offsets (the relaxation's have none: NULL). */
static int states_alloc(States *s, int64_t n, int64_t live, int offsets) {
    size_t cells = (size_t)(n * live > 0 ? n * live : 1), rows = (size_t)(n ? n : 1);
    s->n = n; s->live = live;
    s->region = malloc(cells * sizeof(int64_t));
    s->offset = offsets ? malloc(cells * sizeof(int64_t)) : NULL;
    s->cost = malloc(rows * sizeof(int64_t)); s->slow = malloc(rows * sizeof(int64_t));
    s->node = malloc(rows * sizeof(int64_t));
    if (!s->region || (offsets && !s->offset) || !s->cost || !s->slow || !s->node) {
        states_free(s);
        return 0;
    }
    return 1;
}

/* The rows ``pick`` of ``s`` (in that order), in place. */
static int states_pick(States *s, const int64_t *pick, int64_t m) {
    int64_t rising = 1, w = s->live;
    for (int64_t i = 0; i < m && rising; i++)
        rising = pick[i] >= i && (!i || pick[i] > pick[i - 1]);
    if (rising) { /* each row moves down, over rows already moved or dropped */
        for (int64_t i = 0; i < m; i++) {
            int64_t r = pick[i];
            if (r == i) continue;
            memcpy(s->region + i * w, s->region + r * w, (size_t)w * 8);
            if (s->offset) memcpy(s->offset + i * w, s->offset + r * w, (size_t)w * 8);
            s->cost[i] = s->cost[r]; s->slow[i] = s->slow[r]; s->node[i] = s->node[r];
        }
        s->n = m;
        return 1;
    }
    States t;
    if (!states_alloc(&t, m, s->live, s->offset != NULL)) return 0;
    for (int64_t i = 0; i < m; i++) {
        int64_t r = pick[i];
        memcpy(t.region + i * s->live, s->region + r * s->live, (size_t)s->live * 8);
        if (s->offset)
            memcpy(t.offset + i * s->live, s->offset + r * s->live, (size_t)s->live * 8);
        t.cost[i] = s->cost[r]; t.slow[i] = s->slow[r]; t.node[i] = s->node[r];
    }
    states_free(s);
    *s = t;
    return 1;
}

static int nodes_add(Nodes *g, int64_t parent, int64_t unit, int64_t region, int64_t offset) {
    if (g->len == g->cap) {
        int64_t cap = g->cap ? 2 * g->cap : 1024;
        int64_t *p = realloc(g->parent, (size_t)cap * 8), *u = NULL, *r = NULL, *o = NULL;
        if (p) g->parent = p;
        if (p) u = realloc(g->unit, (size_t)cap * 8);
        if (u) g->unit = u;
        if (u) r = realloc(g->region, (size_t)cap * 8);
        if (r) g->region = r;
        if (r) o = realloc(g->offset, (size_t)cap * 8);
        if (!o) return 0;
        g->offset = o; g->cap = cap;
    }
    g->parent[g->len] = parent; g->unit[g->len] = unit; g->region[g->len] = region;
    g->offset[g->len] = offset;
    g->len++;
    return 1;
}

/* Row ``r`` of ``next`` (a column more than ``s``): the row ``parent`` of ``s``, then the
 * unit at ``region`` and ``offset``; its cost, slow bytes, and node. */
static int child(States *next, int64_t r, const States *s, int64_t parent, Nodes *g,
                 int64_t unit, int64_t region, int64_t offset, int64_t cost, int64_t slow) {
    int64_t w = s->live;
    memcpy(next->region + r * (w + 1), s->region + parent * w, (size_t)w * 8);
    next->region[r * (w + 1) + w] = region;
    if (next->offset) {
        memcpy(next->offset + r * (w + 1), s->offset + parent * w, (size_t)w * 8);
        next->offset[r * (w + 1) + w] = offset;
    }
    next->cost[r] = cost; next->slow[r] = slow;
    if (!nodes_add(g, s->node[parent], unit, region, offset)) return 0;
    next->node[r] = g->len - 1;
    return 1;
}

/* Sorting with a context: the GIL is held, so one static context is enough. */
static const int64_t *key_cost;
static const double *key_bound;
static const int64_t *key_wide;

static int by_cost(const void *a, const void *b) { /* np.argsort(cost, kind="stable") */
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (key_cost[i] != key_cost[j]) return key_cost[i] < key_cost[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

static int by_bound(const void *a, const void *b) { /* np.lexsort((-wide, bound)) */
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    if (key_bound[i] != key_bound[j]) return key_bound[i] < key_bound[j] ? -1 : 1;
    if (key_wide[i] != key_wide[j]) return key_wide[i] > key_wide[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* ``order`` (the rows 0..n-1, any order) sorted stably by ``key`` (signed), a byte at a
 * time, the bytes that every key shares skipped: np.argsort(key, kind="stable") applied
 * to ``order``. ``spare``: room for n rows. */
static void radix_sort(int64_t *order, int64_t *spare, const int64_t *key, int64_t n) {
    static int64_t count[8][256]; /* the GIL is held: one table is enough */
    const uint64_t sign = (uint64_t)1 << 63;
    memset(count, 0, sizeof count);
    for (int64_t i = 0; i < n; i++) {
        uint64_t k = (uint64_t)key[i] ^ sign;
        for (int b = 0; b < 8; b++) count[b][(k >> (8 * b)) & 255]++;
    }
    int64_t *from = order, *to = spare;
    for (int b = 0; b < 8 && n; b++) {
        if (count[b][(((uint64_t)key[0] ^ sign) >> (8 * b)) & 255] == n) continue;
        int64_t at = 0;
        for (int d = 0; d < 256; d++) { int64_t c = count[b][d]; count[b][d] = at; at += c; }
        for (int64_t i = 0; i < n; i++)
            to[count[b][(((uint64_t)key[from[i]] ^ sign) >> (8 * b)) & 255]++] = from[i];
        int64_t *swap = from; from = to; to = swap;
    }
    if (from != order) memcpy(order, from, (size_t)n * 8);
}

/* `merged` of regions_sweep.py on the rows (region, offset): the source rows kept, in
 * the order of their hash (then cost, then row), into ``chosen``; their count. */
static int64_t merged(const States *s, const int64_t *mix, int64_t *chosen, int64_t *hash,
                      int64_t *order) {
    int64_t n = s->n, w = s->live;
    if (!n) return 0;
    if (!w) { /* no column: the first least cost */
        chosen[0] = 0;
        for (int64_t i = 1; i < n; i++)
            if (s->cost[i] < s->cost[chosen[0]]) chosen[0] = i;
        return 1;
    }
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = 0;
        for (int64_t j = 0; j < w; j++)
            h += (uint64_t)s->region[i * w + j] * (uint64_t)mix[j];
        for (int64_t j = 0; s->offset && j < w; j++)
            h += (uint64_t)s->offset[i * w + j] * (uint64_t)mix[w + j];
        hash[i] = (int64_t)h;
        order[i] = i;
    }
    radix_sort(order, chosen, s->cost, n); /* np.lexsort((cost, hash)) */
    radix_sort(order, chosen, hash, n);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = order[i], q = i ? order[i - 1] : -1;
        if (q < 0 || memcmp(s->region + r * w, s->region + q * w, (size_t)w * 8) ||
            (s->offset && memcmp(s->offset + r * w, s->offset + q * w, (size_t)w * 8)))
            chosen[m++] = r;
    }
    return m;
}

static int64_t floor_mod(int64_t a, int64_t m) {
    int64_t r = a % m;
    return r < 0 ? r + m : r;
}

static int64_t aligned(int64_t v, int64_t residue, int64_t modulus, int up) {
    if (modulus == 1) return v;
    int64_t shift = floor_mod(residue - v, modulus);
    return up ? v + shift : v + shift - (shift > 0 ? modulus : 0);
}

/* `Guide.rest`: per state, what the units starting after step ``t`` cost at least. */
static void rest(const Sweep *w, int64_t t, const int64_t *live, const States *s,
                 const int64_t *where, double *out) {
    int64_t lo = 0, hi = w->g_n, key = w->horizon - t; /* searchsorted(side="right") - 1 */
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (w->g_steps[mid] <= key) lo = mid + 1; else hi = mid;
    }
    int64_t at = lo - 1, n = s->n, k = s->live;
    for (int64_t i = 0; i < n; i++) out[i] = 0.0;
    if (at < 0) return;
    const int64_t *seen = w->g_seen + w->g_seen_ptr[at];
    int64_t m = w->g_seen_ptr[at + 1] - w->g_seen_ptr[at];
    int64_t first = w->g_state_ptr[at], rows = w->g_state_ptr[at + 1] - first;
    if (m != k) return;
    for (int64_t j = 0; j < m; j++)
        if (where[seen[j]] < 0) return;
    if (!k) {
        int64_t least = w->g_costs[first];
        for (int64_t r = 1; r < rows; r++)
            if (w->g_costs[first + r] < least) least = w->g_costs[first + r];
        for (int64_t i = 0; i < n; i++) out[i] = (double)least;
        return;
    }
    const int64_t *states = w->g_states + w->g_cell_ptr[at];
    for (int64_t i = 0; i < n; i++) {
        const int64_t *mine = s->region + i * k;
        int64_t a = 0, b = rows; /* the first row not below the state's, lexicographically */
        while (a < b) {
            int64_t mid = (a + b) / 2, c = 0;
            for (int64_t j = 0; j < m && !c; j++) {
                int64_t x = states[mid * m + j], y = mine[where[seen[j]]];
                c = x < y ? -1 : x > y;
            }
            if (c < 0) a = mid + 1; else b = mid;
        }
        int hit = a < rows;
        for (int64_t j = 0; j < m && hit; j++)
            hit = states[a * m + j] == mine[where[seen[j]]];
        if (!hit) { out[i] = INFINITY; continue; }
        int64_t own = 0;
        for (int64_t j = 0; j < k; j++) own += w->price[live[j] * w->regions + mine[j]];
        out[i] = (double)(w->g_costs[first + a] - own);
    }
}

/* `_widest_gap`: per state, the least over the placed regions of its widest free range. */
static int64_t widest_gap(const Sweep *w, const States *s, int64_t i, const int64_t *live,
                          int64_t *low, int64_t *high) {
    int64_t widest = FAR, k = s->live;
    for (int64_t r = 0; r < w->placed; r++) {
        int64_t m = 0, limit = w->limits[r];
        for (int64_t j = 0; j < k; j++)
            if (s->region[i * k + j] == r) {
                low[m] = s->offset[i * k + j];
                high[m] = low[m] + w->extent[live[j]];
                m++;
            }
        for (int64_t a = 1; a < m; a++) /* insertion sort by low (few units per region) */
            for (int64_t b = a; b > 0 && low[b] < low[b - 1]; b--) {
                int64_t x = low[b]; low[b] = low[b - 1]; low[b - 1] = x;
                x = high[b]; high[b] = high[b - 1]; high[b - 1] = x;
            }
        int64_t ceiling = 0, gap = INT64_MIN;
        for (int64_t a = 0; a < m; a++) {
            if (low[a] - ceiling > gap) gap = low[a] - ceiling;
            if (high[a] > ceiling) ceiling = high[a];
        }
        if (m < k) { /* the other units sit at the limit, after these */
            if (limit - ceiling > gap) gap = limit - ceiling;
            if (limit > ceiling) ceiling = limit;
        }
        if (limit - ceiling > gap) gap = limit - ceiling;
        if (gap < widest) widest = gap;
    }
    return widest;
}

typedef struct { /* children of one unit's branching */
    int64_t *parent, *region, *offset, *cost, *slow;
    int64_t len, cap;
} Children;

static int child_add(Children *c, int64_t parent, int64_t region, int64_t offset, int64_t cost,
                     int64_t slow) {
    if (c->len == c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 256;
        int64_t **all[5] = {&c->parent, &c->region, &c->offset, &c->cost, &c->slow};
        for (int a = 0; a < 5; a++) {
            int64_t *p = realloc(*all[a], (size_t)cap * 8);
            if (!p) return 0;
            *all[a] = p;
        }
        c->cap = cap;
    }
    c->parent[c->len] = parent; c->region[c->len] = region; c->offset[c->len] = offset;
    c->cost[c->len] = cost; c->slow[c->len] = slow;
    c->len++;
    return 1;
}

enum { DONE = 0, NONE = 1, NOMEM = -1 };

/* Keeps only the nodes the states reach from ``mark`` on, renumbered from ``mark``. */
static int compact(Nodes *g, States *s, int64_t mark) {
    int64_t fresh = g->len - mark;
    if (fresh <= 0) return 1;
    int64_t *remap = malloc((size_t)fresh * 8), *stack = malloc((size_t)fresh * 8);
    int64_t *saved = malloc((size_t)fresh * 4 * 8);
    if (!remap || !stack || !saved) { free(remap); free(stack); free(saved); return 0; }
    for (int64_t a = 0; a < fresh; a++) {
        remap[a] = -1;
        saved[4 * a] = g->parent[mark + a]; saved[4 * a + 1] = g->unit[mark + a];
        saved[4 * a + 2] = g->region[mark + a]; saved[4 * a + 3] = g->offset[mark + a];
    }
    int64_t next = mark;
    for (int64_t i = 0; i < s->n; i++) {
        int64_t depth = 0, v = s->node[i];
        while (v >= mark && remap[v - mark] < 0) { stack[depth++] = v; v = saved[4 * (v - mark)]; }
        while (depth--) {
            int64_t old = stack[depth] - mark, parent = saved[4 * old];
            if (parent >= mark) parent = remap[parent - mark];
            g->parent[next] = parent; g->unit[next] = saved[4 * old + 1];
            g->region[next] = saved[4 * old + 2]; g->offset[next] = saved[4 * old + 3];
            remap[old] = next++;
        }
        if (s->node[i] >= mark) s->node[i] = remap[s->node[i] - mark];
    }
    g->len = next;
    free(remap); free(stack); free(saved);
    return 1;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The beam over every step; DONE with the best state's cost and each unit's region and
 * offset in ``unit_region`` and ``unit_offset``, NONE (no plan: the Python twin's None),
 * or NOMEM. */
static int run(const Sweep *w, int64_t *best_cost, int64_t *unit_region, int64_t *unit_offset) {
    int64_t U = w->units;
    int64_t *live = malloc((size_t)(U + 1) * 8), *where = malloc((size_t)(U + 1) * 8);
    int64_t *column = calloc((size_t)(U + 1), 8), *low = malloc((size_t)(U + 1) * 8);
    int64_t *high = malloc((size_t)(U + 1) * 8), *held = malloc((size_t)(U + 1) * 8);
    int64_t *keep = malloc((size_t)(U + 1) * 8);
    int64_t cand_cap = 0, *cand = NULL, scratch_cap = 0, *chosen = NULL, *hash = NULL,
            *order = NULL, *wide = NULL;
    double *bound = NULL;
    Nodes g = {0};
    Children c = {0};
    States s = {0};
    int code = NOMEM;
    if (!live || !where || !column || !low || !high || !held || !keep) goto out;
    scratch_cap = 16;
    chosen = malloc(16 * 8); hash = malloc(16 * 8); order = malloc(16 * 8); wide = malloc(16 * 8);
    bound = malloc(16 * sizeof(double));
    if (!chosen || !hash || !order || !wide || !bound) goto out;
    for (int64_t u = 0; u < U; u++) where[u] = -1;
    if (!states_alloc(&s, 1, 0, 1)) goto out;
    s.cost[0] = 0; s.slow[0] = 0; s.node[0] = -1;
    int64_t nlive = 0, work = 0;
    for (int64_t e = 0; e < w->n_events; e++) {
        int64_t t = w->events[e];
        if (w->deadline < INFINITY && now_seconds() > w->deadline) { code = NONE; goto out; }
        int64_t kept = 0;
        for (int64_t j = 0; j < nlive; j++)
            if (w->ends[live[j]] > t) keep[kept++] = j;
        if (kept < nlive) { /* ended units leave: their columns go */
            for (int64_t i = 0; i < s.n; i++)
                for (int64_t j = 0; j < kept; j++) {
                    s.region[i * kept + j] = s.region[i * nlive + keep[j]];
                    s.offset[i * kept + j] = s.offset[i * nlive + keep[j]];
                }
            for (int64_t j = 0; j < nlive; j++) where[live[j]] = -1;
            for (int64_t j = 0; j < kept; j++) { live[j] = live[keep[j]]; where[live[j]] = j; }
            nlive = kept; s.live = kept;
        }
        int64_t mark = g.len, starts = w->ev_ptr[e + 1] - w->ev_ptr[e];
        for (int64_t a = w->ev_ptr[e]; a < w->ev_ptr[e + 1]; a++) {
            int64_t u = w->ev_units[a], width = w->extent[u];
            c.len = 0;
            for (int64_t q = w->choice_ptr[u]; q < w->choice_ptr[u + 1]; q++) {
                int64_t k = w->choice_k[q], price = w->choice_price[q];
                if (k >= w->placed) {
                    for (int64_t i = 0; i < s.n; i++)
                        if (w->most < 0 || s.slow[i] + w->unit_size[u] <= w->most)
                            if (!child_add(&c, i, k, 0, s.cost[i] + price,
                                           s.slow[i] + w->unit_size[u])) goto out;
                    continue;
                }
                int64_t limit = w->limits[k], count = 0;
                for (int64_t i = 0; i < s.n; i++) {
                    int64_t m = 0;
                    for (int64_t j = 0; j < nlive; j++) m += s.region[i * nlive + j] == k;
                    if (m > count) count = m;
                }
                int64_t fixed = limit / (width > 1 ? width : 1);
                fixed = (fixed < GRID ? fixed : GRID) + 1;
                int64_t per = w->pinned[u] >= 0 ? 1 : fixed + 2 * count;
                work += s.n * per * (count + 1);
                if (work > w->max_work) { code = NONE; goto out; }
                if (per > cand_cap) {
                    int64_t *p = realloc(cand, (size_t)per * 8);
                    if (!p) goto out;
                    cand = p; cand_cap = per;
                }
                for (int64_t i = 0; i < s.n; i++) {
                    const int64_t *reg = s.region + i * nlive, *off = s.offset + i * nlive;
                    int64_t m = 0, nc = 0;
                    for (int64_t j = 0; j < nlive; j++)
                        if (reg[j] == k) { low[m] = off[j]; high[m] = off[j] + w->extent[live[j]]; m++; }
                    if (w->pinned[u] >= 0) cand[nc++] = w->pinned[u];
                    else {
                        for (int64_t f = 0; f < fixed - 1; f++)
                            cand[nc++] = aligned(f * width, w->residue[u], w->modulus[u], 1);
                        cand[nc++] = aligned(limit - width, w->residue[u], w->modulus[u], 1);
                        for (int64_t j = 0; j < m; j++)
                            cand[nc++] = aligned(high[j], w->residue[u], w->modulus[u], 1);
                        for (int64_t j = 0; j < m; j++)
                            cand[nc++] = aligned(low[j] - width, w->residue[u], w->modulus[u], 0);
                    }
                    for (int64_t x = 0; x < nc; x++) {
                        int64_t at = cand[x];
                        if (at < 0 || at + width > limit) continue;
                        int clear = 1;
                        for (int64_t j = 0; j < m && clear; j++)
                            clear = at + width <= low[j] || high[j] <= at;
                        if (clear && !child_add(&c, i, k, at, s.cost[i] + price, s.slow[i]))
                            goto out;
                    }
                }
            }
            States t2;
            if (!states_alloc(&t2, c.len, nlive + 1, 1)) goto out;
            for (int64_t i = 0; i < c.len; i++)
                if (!child(&t2, i, &s, c.parent[i], &g, u, c.region[i], c.offset[i], c.cost[i],
                           c.slow[i])) {
                    states_free(&t2);
                    goto out;
                }
            states_free(&s);
            s = t2;
            live[nlive] = u; where[u] = nlive; nlive++;
            if (s.n > scratch_cap) {
                int64_t cap = 2 * s.n;
                int64_t *p1 = realloc(chosen, (size_t)cap * 8), *p2 = NULL, *p3 = NULL, *p4 = NULL;
                if (p1) chosen = p1;
                if (p1) p2 = realloc(hash, (size_t)cap * 8);
                if (p2) hash = p2;
                if (p2) p3 = realloc(order, (size_t)cap * 8);
                if (p3) order = p3;
                if (p3) p4 = realloc(wide, (size_t)cap * 8);
                if (p4) wide = p4;
                double *p5 = p4 ? realloc(bound, (size_t)cap * sizeof(double)) : NULL;
                if (!p5) goto out;
                bound = p5; scratch_cap = cap;
            }
            if (s.n > w->crowd * w->max_states) { /* many units start at once: the cheapest */
                int64_t m = merged(&s, w->mix, chosen, hash, order);
                int64_t *least = hash; /* the merged rows' costs, then their order */
                for (int64_t i = 0; i < m; i++) { least[i] = s.cost[chosen[i]]; order[i] = i; }
                key_cost = least;
                qsort(order, (size_t)m, sizeof(int64_t), by_cost);
                int64_t top = m < w->crowd * w->max_states ? m : w->crowd * w->max_states;
                for (int64_t i = 0; i < top; i++) wide[i] = chosen[order[i]];
                if (!states_pick(&s, wide, top)) goto out;
            }
        }
        if (starts) {
            int64_t m = merged(&s, w->mix, chosen, hash, order);
            if (!states_pick(&s, chosen, m)) goto out;
        }
        if (w->is_box[e] && s.n) {
            for (int64_t j = 0; j < nlive; j++) { column[live[j]] = j; held[j] = 0; }
            for (int64_t b = 0; b < w->boxes; b++)
                if (w->box_start[b] <= t && w->box_end[b] > t) {
                    int64_t col = column[w->box_unit[b]];
                    if (col >= 0 && col < nlive) held[col] += w->box_bytes[b];
                }
            int64_t m = 0;
            for (int64_t i = 0; i < s.n; i++) {
                int64_t load = 0;
                for (int64_t j = 0; j < nlive; j++)
                    if (s.region[i * nlive + j] == w->placed) load += held[j];
                if (load <= w->limits[w->placed]) chosen[m++] = i;
            }
            if (m < s.n && !states_pick(&s, chosen, m)) goto out;
        }
        if (starts && s.n) {
            rest(w, t, live, &s, where, bound);
            int64_t m = 0;
            for (int64_t i = 0; i < s.n; i++) {
                bound[i] += (double)s.cost[i];
                wide[i] = widest_gap(w, &s, i, live, low, high);
                order[i] = i;
            }
            key_bound = bound; key_wide = wide;
            qsort(order, (size_t)s.n, sizeof(int64_t), by_bound);
            for (int64_t i = 0; i < s.n && m < w->max_states; i++)
                if (bound[order[i]] <= w->ceiling) chosen[m++] = order[i];
            if (!states_pick(&s, chosen, m)) goto out;
        }
        if (!s.n) { code = NONE; goto out; }
        if (!compact(&g, &s, mark)) goto out;
    }
    int64_t best = 0;
    for (int64_t i = 1; i < s.n; i++)
        if (s.cost[i] < s.cost[best]) best = i;
    *best_cost = s.cost[best];
    for (int64_t v = s.node[best]; v >= 0; v = g.parent[v]) {
        unit_region[g.unit[v]] = g.region[v];
        unit_offset[g.unit[v]] = g.offset[v];
    }
    code = DONE;
out:
    states_free(&s);
    free(live); free(where); free(column); free(low); free(high); free(held); free(keep);
    free(cand); free(chosen); free(hash); free(order); free(wide); free(bound);
    free(g.parent); free(g.unit); free(g.region); free(g.offset);
    free(c.parent); free(c.region); free(c.offset); free(c.cost); free(c.slow);
    return code;
}

/* ---- The relaxation's sweep (`sweep_relaxation` of regions_sweep.py) compiled ----
 *
 *   state: per live unit its region, its cost, and the node of its choices (the States
 *          and Nodes above without offsets: `merged` then hashes the regions alone);
 *   step:  the work counted; ended units leave and equal states merge; each starting unit
 *          branches every state over its regions, the states above the ceiling go; the
 *          loads checked where a box starts; with a record, the step's live units, states
 *          (rows sorted, for the layout sweep's binary search in `rest`) and costs kept.
 */

typedef struct { /* the columns Python hands over (see relax's doc) */
    const int64_t *events, *is_box, *ev_ptr, *ev_units, *ends, *choice_ptr, *choice_k,
        *choice_price, *limits, *box_start, *box_end, *box_bytes, *box_unit, *mix;
    int64_t n_events, units, regions, boxes, has_ceiling, ceiling, max_states, max_work;
} Relax;

typedef struct { /* a growing int64 column */
    int64_t *data;
    int64_t len, cap;
} Column;

static int column_add(Column *c, const int64_t *values, int64_t n) {
    if (c->len + n > c->cap) {
        int64_t cap = c->cap ? c->cap : 256;
        while (cap < c->len + n) cap *= 2;
        int64_t *p = realloc(c->data, (size_t)cap * 8);
        if (!p) return 0;
        c->data = p; c->cap = cap;
    }
    memcpy(c->data + c->len, values, (size_t)n * 8);
    c->len += n;
    return 1;
}

enum { STEPS, SEEN_PTR, SEEN, STATE_PTR, CELL_PTR, CELLS, COSTS, RECORDED };

/* ``order``: the rows 0..n-1 of ``rows`` (n x w, values in [0, regions)) sorted
 * lexicographically, stably (np.lexsort(rows.T[::-1])): a counting sort per column, the
 * last first. ``spare``: room for n rows; ``count``: for regions + 1. */
static void rows_sort(int64_t *order, int64_t *spare, int64_t *count, const int64_t *rows,
                      int64_t n, int64_t w, int64_t regions) {
    for (int64_t i = 0; i < n; i++) order[i] = i;
    for (int64_t c = w - 1; c >= 0; c--) {
        memset(count, 0, (size_t)(regions + 1) * 8);
        for (int64_t i = 0; i < n; i++) count[rows[i * w + c] + 1]++;
        for (int64_t k = 0; k < regions; k++) count[k + 1] += count[k];
        for (int64_t i = 0; i < n; i++) spare[count[rows[order[i] * w + c]]++] = order[i];
        memcpy(order, spare, (size_t)n * 8);
    }
}

/* The step ``t``'s live units, states (rows sorted) and costs onto ``record``. */
static int recorded(Column *record, int64_t t, const int64_t *live, const States *s,
                    int64_t regions, int64_t *order, int64_t *spare, int64_t *count) {
    int64_t w = s->live;
    rows_sort(order, spare, count, s->region, s->n, w, regions);
    for (int64_t i = 0; i < s->n; i++)
        if (!column_add(&record[CELLS], s->region + order[i] * w, w) ||
            !column_add(&record[COSTS], s->cost + order[i], 1))
            return 0;
    return column_add(&record[STEPS], &t, 1) && column_add(&record[SEEN], live, w) &&
           column_add(&record[SEEN_PTR], &record[SEEN].len, 1) &&
           column_add(&record[STATE_PTR], &record[COSTS].len, 1) &&
           column_add(&record[CELL_PTR], &record[CELLS].len, 1);
}

/* Room for ``n`` rows in the scratch columns. */
static int scratch(int64_t n, int64_t *cap, int64_t **a, int64_t **b, int64_t **c) {
    if (n <= *cap) return 1;
    int64_t size = 2 * n;
    int64_t *p = realloc(*a, (size_t)size * 8);
    if (!p) return 0;
    *a = p;
    if (!(p = realloc(*b, (size_t)size * 8))) return 0;
    *b = p;
    if (!(p = realloc(*c, (size_t)size * 8))) return 0;
    *c = p;
    *cap = size;
    return 1;
}

/* The relaxation's sweep; DONE with the least cost and each unit's region in
 * ``unit_region``, NONE (the Python twin's None), or NOMEM. ``record``: NULL, or the
 * RECORDED columns it fills (also on NONE, up to the last step done). */
static int relax_run(const Relax *w, int64_t *best_cost, int64_t *unit_region,
                     Column *record) {
    int64_t U = w->units, R = w->regions;
    int64_t *live = malloc((size_t)(U + 1) * 8), *where = malloc((size_t)(U + 1) * 8);
    int64_t *held = malloc((size_t)(U + 1) * 8), *keep = malloc((size_t)(U + 1) * 8);
    int64_t *count = malloc((size_t)(R + 1) * 8);
    int64_t cap = 0, *chosen = NULL, *hash = NULL, *order = NULL;
    Nodes g = {0};
    States s = {0};
    int code = NOMEM;
    if (!live || !where || !held || !keep || !count || !states_alloc(&s, 1, 0, 0)) goto out;
    for (int64_t u = 0; u < U; u++) where[u] = -1;
    s.cost[0] = 0; s.slow[0] = 0; s.node[0] = -1;
    int64_t nlive = 0, work = 0;
    for (int64_t e = 0; e < w->n_events; e++) {
        int64_t t = w->events[e], mark = g.len, kept = 0;
        work += s.n * (nlive + 1);
        if (work > w->max_work) { code = NONE; goto out; }
        if (!scratch(s.n, &cap, &chosen, &hash, &order)) goto out;
        for (int64_t j = 0; j < nlive; j++)
            if (w->ends[live[j]] > t) keep[kept++] = j;
        if (kept < nlive) { /* ended units leave: their columns go, equal states merge */
            for (int64_t i = 0; i < s.n; i++)
                for (int64_t j = 0; j < kept; j++)
                    s.region[i * kept + j] = s.region[i * nlive + keep[j]];
            for (int64_t j = 0; j < nlive; j++) where[live[j]] = -1;
            for (int64_t j = 0; j < kept; j++) { live[j] = live[keep[j]]; where[live[j]] = j; }
            nlive = kept; s.live = kept;
            int64_t m = merged(&s, w->mix, chosen, hash, order);
            if (!states_pick(&s, chosen, m)) goto out;
        }
        for (int64_t a = w->ev_ptr[e]; a < w->ev_ptr[e + 1]; a++) {
            int64_t u = w->ev_units[a], first = w->choice_ptr[u];
            int64_t options = w->choice_ptr[u + 1] - first, width = nlive + 1;
            if (!options) { code = NONE; goto out; }
            States next;
            if (!states_alloc(&next, s.n * options, width, 0)) goto out;
            for (int64_t i = 0; i < s.n; i++)
                for (int64_t o = 0; o < options; o++)
                    if (!child(&next, i * options + o, &s, i, &g, u, w->choice_k[first + o], 0,
                               s.cost[i] + w->choice_price[first + o], 0)) {
                        states_free(&next);
                        goto out;
                    }
            states_free(&s);
            s = next;
            live[nlive] = u; where[u] = nlive; nlive++;
            if (!scratch(s.n, &cap, &chosen, &hash, &order)) goto out;
            if (w->has_ceiling) {
                int64_t m = 0;
                for (int64_t i = 0; i < s.n; i++)
                    if (s.cost[i] <= w->ceiling) chosen[m++] = i;
                if (m < s.n && !states_pick(&s, chosen, m)) goto out;
            }
            if (s.n > w->max_states) { code = NONE; goto out; }
        }
        if (w->is_box[e] && s.n) {
            for (int64_t j = 0; j < nlive; j++) held[j] = 0;
            for (int64_t b = 0; b < w->boxes; b++)
                if (w->box_start[b] <= t && w->box_end[b] > t && where[w->box_unit[b]] >= 0)
                    held[where[w->box_unit[b]]] += w->box_bytes[b];
            int64_t m = 0;
            for (int64_t i = 0; i < s.n; i++) {
                const int64_t *row = s.region + i * nlive;
                int fits = 1;
                for (int64_t k = 0; k < R && fits; k++) { /* a sum per region: no stores */
                    int64_t load = 0;
                    for (int64_t j = 0; j < nlive; j++) load += held[j] & -(int64_t)(row[j] == k);
                    fits = load <= w->limits[k];
                }
                if (fits) chosen[m++] = i;
            }
            if (m < s.n && !states_pick(&s, chosen, m)) goto out;
        }
        if (!s.n) { code = NONE; goto out; }
        if (record && !recorded(record, t, live, &s, R, order, chosen, count)) goto out;
        if (!compact(&g, &s, mark)) goto out;
    }
    int64_t best = 0;
    for (int64_t i = 1; i < s.n; i++)
        if (s.cost[i] < s.cost[best]) best = i;
    *best_cost = s.cost[best];
    for (int64_t v = s.node[best]; v >= 0; v = g.parent[v]) unit_region[g.unit[v]] = g.region[v];
    code = DONE;
out:
    states_free(&s);
    free(live); free(where); free(held); free(keep); free(count);
    free(chosen); free(hash); free(order);
    free(g.parent); free(g.unit); free(g.region); free(g.offset);
    return code;
}

#define RELAX_COLUMNS 14

static PyObject *relax(PyObject *self, PyObject *args) {
    Py_buffer b[RELAX_COLUMNS];
    long long has_ceiling, ceiling, max_states, max_work, want_record;
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*y*LLLLL", &b[0], &b[1], &b[2],
                          &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11],
                          &b[12], &b[13], &has_ceiling, &ceiling, &max_states, &max_work,
                          &want_record))
        return NULL;
    const int64_t *a[RELAX_COLUMNS];
    for (int i = 0; i < RELAX_COLUMNS; i++) a[i] = b[i].buf;
    Relax w = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
               a[12], a[13]};
    w.n_events = b[0].len / 8; w.units = b[4].len / 8; w.regions = b[8].len / 8;
    w.boxes = b[9].len / 8; w.has_ceiling = has_ceiling; w.ceiling = ceiling;
    w.max_states = max_states; w.max_work = max_work;
    PyObject *result = NULL;
    int64_t events_units = b[2].len == b[0].len + 8 ? a[2][w.n_events] : -1;
    int64_t choices = b[5].len == b[4].len + 8 ? a[5][w.units] : -1;
    int ok = b[1].len == b[0].len && events_units >= 0 && b[3].len == events_units * 8 &&
             choices >= 0 && b[6].len == choices * 8 && b[7].len == choices * 8 &&
             b[10].len == b[9].len && b[11].len == b[9].len && b[12].len == b[9].len &&
             b[13].len >= (2 * w.units + 2) * 8;
    for (int64_t u = 0; ok && u < events_units; u++) ok = a[3][u] >= 0 && a[3][u] < w.units;
    for (int64_t q = 0; ok && q < choices; q++) ok = a[6][q] >= 0 && a[6][q] < w.regions;
    for (int64_t q = 0; ok && q < w.boxes; q++) ok = a[12][q] >= 0 && a[12][q] < w.units;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "relax: arrays of the wrong lengths or values");
        goto release;
    }
    Column record[RECORDED];
    memset(record, 0, sizeof record);
    int64_t *unit_region = calloc((size_t)(w.units ? w.units : 1), 8), cost = 0, zero = 0;
    for (int c = SEEN_PTR; want_record && c <= CELL_PTR; c++) /* the pointers start at 0 */
        if (c != SEEN && !column_add(&record[c], &zero, 1)) {
            free(unit_region);
            unit_region = NULL;
        }
    int code = unit_region ? relax_run(&w, &cost, unit_region, want_record ? record : NULL)
                           : NOMEM;
    if (code == NOMEM) PyErr_NoMemory();
    else {
        PyObject *found = code == NONE ? Py_BuildValue("(OO)", Py_None, Py_None) :
            Py_BuildValue("(Ly#)", (long long)cost, (const char *)unit_region,
                          (Py_ssize_t)(w.units * 8));
        PyObject *kept = NULL;
        if (found && want_record) {
            kept = PyTuple_New(RECORDED);
            for (int c = 0; kept && c < RECORDED; c++) {
                PyObject *column = PyBytes_FromStringAndSize(
                    (const char *)record[c].data, (Py_ssize_t)(record[c].len * 8));
                if (!column) { Py_CLEAR(kept); break; }
                PyTuple_SET_ITEM(kept, c, column);
            }
        } else if (found) {
            kept = Py_None;
            Py_INCREF(kept);
        }
        if (found && kept) result = Py_BuildValue("(NN)", found, kept);
        else { Py_XDECREF(found); Py_XDECREF(kept); }
    }
    free(unit_region);
    for (int c = 0; c < RECORDED; c++) free(record[c].data);
release:
    for (int i = 0; i < RELAX_COLUMNS; i++) PyBuffer_Release(&b[i]);
    return result;
}

#define COLUMNS 27

static PyObject *sweep(PyObject *self, PyObject *args) {
    Py_buffer b[COLUMNS];
    long long placed, most, max_states, crowd, max_work, horizon;
    double ceiling, seconds; /* seconds: the wall clock left (inf: no limit) */
    memset(b, 0, sizeof b);
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*LLLLLLdd",
                          &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9],
                          &b[10], &b[11], &b[12], &b[13], &b[14], &b[15], &b[16], &b[17],
                          &b[18], &b[19], &b[20], &b[21], &b[22], &b[23], &b[24], &b[25],
                          &b[26], &placed, &most, &max_states, &crowd, &max_work, &horizon, &ceiling,
                          &seconds))
        return NULL;
    const int64_t *a[COLUMNS];
    for (int i = 0; i < COLUMNS; i++) a[i] = b[i].buf;
    Sweep w = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12],
               a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21], a[22], a[23],
               a[24], a[25], a[26]};
    w.n_events = b[0].len / 8; w.units = b[4].len / 8; w.regions = b[13].len / 8;
    w.boxes = b[14].len / 8; w.g_n = b[18].len / 8;
    w.placed = placed; w.most = most; w.max_states = max_states; w.crowd = crowd;
    w.max_work = max_work; w.horizon = horizon; w.ceiling = ceiling;
    w.deadline = seconds < INFINITY ? now_seconds() + seconds : INFINITY;
    PyObject *result = NULL;
    int ok = b[1].len == b[0].len && b[2].len == b[0].len + 8 && b[10].len == b[4].len + 8 &&
             b[25].len == w.units * w.regions * 8 && w.placed < w.regions &&
             b[19].len == b[18].len + 8 && b[21].len == b[18].len + 8 &&
             b[22].len == b[18].len + 8;
    for (int i = 5; i < 10; i++) ok = ok && b[i].len == b[4].len;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "sweep: arrays of the wrong lengths");
        goto release;
    }
    int64_t *unit_region = calloc((size_t)(w.units ? w.units : 1), 8);
    int64_t *unit_offset = calloc((size_t)(w.units ? w.units : 1), 8);
    int64_t cost = 0;
    int code = unit_region && unit_offset ? run(&w, &cost, unit_region, unit_offset) : NOMEM;
    if (code == NOMEM) PyErr_NoMemory();
    else if (code == NONE) { Py_INCREF(Py_None); result = Py_None; }
    else result = Py_BuildValue("(Ly#y#)", (long long)cost, (const char *)unit_region,
                                (Py_ssize_t)(w.units * 8), (const char *)unit_offset,
                                (Py_ssize_t)(w.units * 8));
    free(unit_region); free(unit_offset);
release:
    for (int i = 0; i < COLUMNS; i++) PyBuffer_Release(&b[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"sweep", sweep, METH_VARARGS,
     "sweep(events, is_box, ev_ptr, ev_units, ends, extent, unit_size, pinned, modulus,"
     " residue, choice_ptr, choice_k, choice_price, limits, box_start, box_end, box_bytes,"
     " box_unit, g_steps, g_seen_ptr, g_seen, g_state_ptr, g_cell_ptr, g_states, g_costs,"
     " price, mix,"
     " placed, most, max_states, crowd, max_work, horizon, ceiling, seconds)"
     " -> (cost, unit regions, unit offsets) as int64 bytes, or None"},
    {"relax", relax, METH_VARARGS,
     "relax(events, is_box, ev_ptr, ev_units, ends, choice_ptr, choice_k, choice_price,"
     " limits, box_start, box_end, box_bytes, box_unit, mix,"
     " has_ceiling, ceiling, max_states, max_work, record)"
     " -> ((cost, unit regions as int64 bytes) or (None, None),"
     " (steps, seen_ptr, seen, state_ptr, cell_ptr, states, costs) as int64 bytes or None)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_layout_kernel",
    "The compiled sweeps of memplan.deploy.regions_layout and regions_sweep.", -1, methods};

PyMODINIT_FUNC PyInit__layout_kernel(void) { return PyModule_Create(&module); }
