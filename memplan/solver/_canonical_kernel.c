/* The compiled kernel of `memplan.solver.canonical`: a depth-first search over
 * canonical layouts of buffers with fixed lifetimes under a capacity.
 *
 * Why C: the search visits up to millions of nodes a second, each a few
 * hundred integer updates; Python would be a hundred times slower.  The
 * algorithm (canonical solutions, section floors, dominance, dynamic
 * decomposition) is the one published with MiniMalloc (Moffitt, ASPLOS 2023);
 * the cover check of sections with no byte to spare (`covered`) and the code
 * are memplan's own.  See canonical.py for the steps and the proof
 * sketch of why the pruning keeps every problem's answer.
 *
 *   address                           a canonical layout: buffers are placed
 *     ^      +-----+                  in increasing (offset, rank) order, each
 *     |   +--+  c  |  +---+           at the lowest offset above the placed
 *     |   | b+-----+  | d |           buffers it overlaps in time (b, then c
 *     +---+------+----+---+--> time   on b, then d on the floor... no: d has
 *         a (floor)                   offset 0 too, so d comes right after a)
 *
 * Time is a list of sections [t, t+1) for t in 0..T-1 (the part's time
 * ranks); a buffer spans the sections [start, end).
 *
 * Interface (one function, GIL released while it runs):
 *   search(sizes, starts, ends, aligns, widths, keys, capacity, node_limit,
 *          seconds, stop) -> (code, offsets, nodes)
 * with int64 buffers (bytes-like; starts/ends in sections, widths the
 * lifetimes in time units), keys = the static order's letters (see key_of),
 * stop = a writable buffer whose first byte set to non-zero ends the search.  code: 1 found (offsets: int64 bytes),
 * 0 proven infeasible, -1 node limit reached, -2 time or stop.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FOUND 1
#define NOT_FOUND 0
#define ABORTED -1
#define STOPPED -2

struct Undo { int64_t *cell, old; };

typedef struct {
    int64_t n, T, capacity;
    const int64_t *size, *start, *end, *align, *width;
    const char *keys;             /* the static order: key letters, most significant first */
    int64_t nkeys;
    int64_t *rank;                /* each buffer's rank in its partition's static order */
    int64_t *ov_begin, *ov;       /* CSR: buffers overlapping each buffer */
    int64_t *sec_begin, *sec;     /* CSR: buffers live in each section, unplaced ones first */
    int64_t *unplaced;            /* per section: how many of its buffers are unplaced */
    int64_t *span_base, *where;   /* where[span_base[b] + t - start[b]]: b's slot in sec */
    int64_t *offset;              /* -1 while unplaced */
    int64_t *solution;            /* offsets of the last placements (the answer when found) */
    int64_t *minoff;              /* lowest offset an unplaced buffer can still take */
    int64_t *floor, *total;       /* per section: lowest free offset, unplaced bytes */
    int64_t *cuts;                /* per boundary t|t+1: unplaced buffers spanning it */
    int64_t *mark;                /* per boundary: +1/-1 where a raised buffer's span begins/ends */
    char *tight;                  /* per section: no byte to spare above the last placement */
    char *reach;                  /* per boundary: `covered`'s sweep */
    int64_t *head, *next;         /* per section / buffer: `covered`'s lists by start */
    struct Undo *trail;           /* raised floors and lowest offsets, undone in LIFO order */
    int64_t trail_len, trail_cap;
    int out_of_memory;            /* the trail could not grow: the search stops */
    int64_t nodes, node_limit;
    double deadline;
    volatile const char *stop;
} Search;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int64_t align_up(int64_t value, int64_t alignment) {
    if (alignment == 1) return value;  /* the usual case: no division */
    int64_t r = value % alignment;
    return r ? value + alignment - r : value;
}

/* Set *cell (a floor or a lowest offset) to `value`, the old one on the trail: one stack
 * for the whole search, as deep as the placements on the path need, where per-node undo
 * lists sized for the worst case held gigabytes on 18k-buffer dives. Out of memory, the
 * search stops at the next node (which returns before using the state). */
static void undoably_set(Search *s, int64_t *cell, int64_t value) {
    if (s->trail_len == s->trail_cap) {
        int64_t cap = 2 * s->trail_cap + 1024;
        struct Undo *grown = realloc(s->trail, sizeof(struct Undo) * (size_t)cap);
        if (grown == NULL) {
            s->out_of_memory = 1;
            return;
        }
        s->trail = grown;
        s->trail_cap = cap;
    }
    s->trail[s->trail_len].cell = cell;
    s->trail[s->trail_len++].old = *cell;
    *cell = value;
}

typedef struct { int64_t offset, rank, buffer; } Candidate;

static int by_offset_rank(const void *x, const void *y) {
    const Candidate *a = x, *b = y;
    if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
    return a->rank < b->rank ? -1 : (a->rank > b->rank);
}

static int solve_partition(Search *s, int64_t lo, int64_t hi);

/* Unplaced buffers of sections [lo, hi), into `out` unless NULL; their count. */
static int64_t members(Search *s, int64_t lo, int64_t hi, int64_t *out) {
    int64_t m = 0;
    for (int64_t b = 0; b < s->n; ++b)
        if (s->offset[b] < 0 && s->start[b] < hi && s->end[b] > lo) {
            if (out != NULL) out[m] = b;
            ++m;
        }
    return m;
}

typedef struct { int64_t key[4]; int64_t buffer; } Keyed;

static int by_keys(const void *x, const void *y) {
    const Keyed *a = x, *b = y;
    for (int i = 0; i < 4; ++i)
        if (a->key[i] != b->key[i]) return a->key[i] > b->key[i] ? -1 : 1;  /* largest first */
    return a->buffer < b->buffer ? -1 : (a->buffer > b->buffer);
}

/* One key of buffer b: W lifetime, A area, T largest unplaced bytes of its sections,
   Z size, E start (earliest first), U end, C sections spanned, O overlapping buffers. */
static int64_t key_of(Search *s, char letter, int64_t b) {
    switch (letter) {
    case 'W': return s->width[b];
    case 'A': return s->width[b] * s->size[b];
    case 'Z': return s->size[b];
    case 'E': return -s->start[b];
    case 'U': return s->end[b];
    case 'C': return s->end[b] - s->start[b];
    case 'O': return s->ov_begin[b + 1] - s->ov_begin[b];
    case 'T': {
        int64_t most = 0;
        for (int64_t t = s->start[b]; t < s->end[b]; ++t)
            if (s->total[t] > most) most = s->total[t];
        return most;
    }
    default: return 0;
    }
}

/* Sort `list` into the static order (at this moment: T counts unplaced bytes) and rank it. */
static void order(Search *s, int64_t *list, int64_t m) {
    Keyed *keyed = malloc(sizeof(Keyed) * (size_t)(m ? m : 1));
    for (int64_t i = 0; i < m; ++i) {
        keyed[i].buffer = list[i];
        for (int j = 0; j < 4; ++j)
            keyed[i].key[j] = j < s->nkeys ? key_of(s, s->keys[j], list[i]) : 0;
    }
    qsort(keyed, (size_t)m, sizeof(Keyed), by_keys);
    for (int64_t i = 0; i < m; ++i) {
        list[i] = keyed[i].buffer;
        s->rank[list[i]] = i;
    }
    free(keyed);
}

/* Whether the tight sections of [lo, hi) can all be covered at `offset`.
 *
 * A tight section (floor at or below `offset`, and its unplaced bytes exactly the
 * room from `offset` to the capacity) wastes no byte in any completion, so
 * some unplaced buffer starts exactly at `offset` there.  In canonical order
 * that buffer's lowest offset is `offset` already (what lies below it is
 * placed) and its rank comes after `rank`; the buffers placed at one offset
 * never share a section.  So a set of such buffers, disjoint in time, must
 * cover every tight section: a sweep over the sections finds whether one
 * exists (an exact cover on perfect packings).  O(m + hi - lo).
 */
static int covered(Search *s, int64_t lo, int64_t hi, const int64_t *list, int64_t m,
                   int64_t offset, int64_t rank) {
    for (int64_t i = 0; i < m; ++i) {
        int64_t u = list[i];
        if (s->offset[u] >= 0 || s->minoff[u] != offset || s->rank[u] < rank ||
            offset + s->size[u] > s->capacity) continue;
        int64_t a = s->start[u] > lo ? s->start[u] : lo;
        s->next[u] = s->head[a];
        s->head[a] = u;
    }
    memset(s->reach + lo, 0, (size_t)(hi - lo + 1));
    s->reach[lo] = 1;
    for (int64_t t = lo; t < hi; ++t) {
        if (s->reach[t]) {
            if (!s->tight[t]) s->reach[t + 1] = 1;
            for (int64_t u = s->head[t]; u >= 0; u = s->next[u])
                s->reach[s->end[u] < hi ? s->end[u] : hi] = 1;
        }
        s->head[t] = -1;
    }
    return s->reach[hi];
}

/* Whether buffer b may come next at its lowest offset, after (min_offset, min_rank) and
 * below `min_height` (dominance: a gap below that an unplaced buffer fits in). */
static int eligible(const Search *s, int64_t b, int64_t min_offset, int64_t min_rank,
                    int64_t min_height) {
    int64_t o = s->minoff[b];
    if (o < min_offset || (o == min_offset && s->rank[b] < min_rank)) return 0;
    return o < min_height && o + s->size[b] <= s->capacity;
}

/* The candidates of a node: their count, the lowest in (offset, rank) order into
 * `lowest`, and all of them into `cand` unless NULL, the lowest first (the others
 * unsorted). */
static int64_t candidates(const Search *s, const int64_t *list, int64_t m, int64_t min_offset,
                          int64_t min_rank, int64_t min_height, Candidate *cand,
                          Candidate *lowest) {
    int64_t k = 0;
    Candidate low = {INT64_MAX, INT64_MAX, -1};
    for (int64_t i = 0; i < m; ++i) {
        int64_t b = list[i];
        if (s->offset[b] >= 0 || !eligible(s, b, min_offset, min_rank, min_height)) continue;
        Candidate c = {s->minoff[b], s->rank[b], b};
        if (cand != NULL) {
            if (k > 0 && by_offset_rank(&c, &low) < 0) {
                cand[k] = cand[0];  /* the lowest so far moves aside */
                cand[0] = c;
            } else {
                cand[k] = c;
            }
        }
        if (by_offset_rank(&c, &low) < 0) low = c;
        ++k;
    }
    *lowest = low;
    return k;
}

#define EAGER_LIST 1024  /* lists up to this long list their candidates at once */

/* Depth-first search of the partition [lo, hi) with buffers `list` (rank order; the placed
 * ones among them are skipped); placements must come after (min_offset, min_rank).
 *
 * Memory: the nodes on the path hold their lists at once, so a node passes its own list
 * down while at most a sixteenth of it is placed (the lists of a path then add up to O(n),
 * not O(n^2)); one over `EAGER_LIST` lists its candidates only when its lowest one fails
 * (a dive's nodes list none), the others at once (a pass less where nodes fail, 10 % of
 * the time on MiniMalloc's problems). What a placement changes goes on the search's
 * trail, not in per-node arrays sized for the worst case. An 18k-buffer dive held 4.4 GB
 * before, 0.9 GB now (most of it the overlap lists and the trail). */
static int search_nodes(Search *s, int64_t lo, int64_t hi, const int64_t *list, int64_t m,
                        int64_t min_offset, int64_t min_rank) {
    if (s->nodes >= s->node_limit) return ABORTED;
    ++s->nodes;
    if ((s->nodes & 255) == 0 && (s->stop[0] || now() > s->deadline)) return STOPPED;
    if (s->stop[0] || s->out_of_memory) return STOPPED;
    int64_t left = 0, min_height = INT64_MAX;
    for (int64_t i = 0; i < m; ++i) {
        int64_t b = list[i];
        if (s->offset[b] >= 0) continue;
        ++left;
        int64_t h = s->minoff[b] + s->size[b];
        if (h < min_height) min_height = h;
    }
    if (left == 0) return FOUND;
    int64_t *rest = NULL;
    if (m - left > m / 16) {
        rest = malloc(sizeof(int64_t) * (size_t)left);
        for (int64_t i = 0, j = 0; i < m; ++i)
            if (s->offset[list[i]] < 0) rest[j++] = list[i];
        list = rest;
        m = left;
    }
    Candidate lowest, *cand = m <= EAGER_LIST ? malloc(sizeof(Candidate) * (size_t)left) : NULL;
    int64_t k = candidates(s, list, m, min_offset, min_rank, min_height, cand, &lowest);
    int code = NOT_FOUND;
    for (int64_t i = 0; i < k && code == NOT_FOUND; ++i) {
        if (i == 1) {  /* the lowest failed: every candidate, the others sorted */
            if (cand == NULL) {
                cand = malloc(sizeof(Candidate) * (size_t)left);
                candidates(s, list, m, min_offset, min_rank, min_height, cand, &lowest);
            }
            qsort(cand + 1, (size_t)(k - 1), sizeof(Candidate), by_offset_rank);
        }
        const Candidate *c = cand == NULL ? &lowest : &cand[i];
        int64_t b = c->buffer, offset = c->offset, top = offset + s->size[b];
        s->offset[b] = offset;
        s->solution[b] = offset;
        int64_t hats = 0, undo_from = s->trail_len;
        for (int64_t j = s->ov_begin[b]; j < s->ov_begin[b + 1]; ++j) {
            int64_t u = s->ov[j];
            if (s->offset[u] >= 0) continue;
            ++hats;
            int64_t lift = align_up(top, s->align[u]);
            if (s->minoff[u] >= lift) continue;
            undoably_set(s, &s->minoff[u], lift);
            /* u's sections (inside [lo, hi): u is unplaced) need their floor again */
            ++s->mark[s->start[u] > lo ? s->start[u] : lo];
            --s->mark[s->end[u] < hi ? s->end[u] : hi];
        }
        int64_t lifted = s->trail_len;  /* the trail's lowest offsets end here */
        for (int64_t t = s->start[b]; t < s->end[b]; ++t) {
            undoably_set(s, &s->floor[t], top);
            s->total[t] -= s->size[b];
            /* move b behind the section's unplaced buffers (undone by counting back up) */
            int64_t *slot = s->where + s->span_base[b] + (t - s->start[b]);
            int64_t last = s->sec_begin[t] + --s->unplaced[t], other = s->sec[last];
            s->sec[*slot] = other;
            s->where[s->span_base[other] + (t - s->start[other])] = *slot;
            s->sec[last] = b;
            *slot = last;
        }
        /* one pass over the sections: a marked section's floor becomes its lowest unplaced
           offset, then every section must hold its unplaced bytes above max(floor, offset) */
        int ok = 1, tight = 0;
        for (int64_t t = lo, marked = 0; t < hi; ++t) {
            marked += s->mark[t];
            if (marked) {
                /* no unplaced buffer of the section lies below its floor: stop at one on it.
                   The lowest one found moves to the front of the section's unplaced
                   buffers, where the next scan meets it first (the set is unchanged) */
                int64_t low = INT64_MAX, level = s->floor[t], at = -1, head = s->sec_begin[t];
                for (int64_t j = head; j < head + s->unplaced[t]; ++j) {
                    int64_t u = s->sec[j];
                    if (s->minoff[u] < low) {
                        low = s->minoff[u];
                        at = j;
                        if (low <= level) break;
                    }
                }
                if (at > head) {
                    int64_t u = s->sec[at], w = s->sec[head];
                    s->sec[head] = u;
                    s->sec[at] = w;
                    s->where[s->span_base[u] + (t - s->start[u])] = head;
                    s->where[s->span_base[w] + (t - s->start[w])] = at;
                }
                if (low != INT64_MAX && s->floor[t] < low) undoably_set(s, &s->floor[t], low);
            }
            int64_t f = s->floor[t] > offset ? s->floor[t] : offset;
            if (s->total[t] && f + s->total[t] > s->capacity) {
                ok = 0;  /* everything above is undone: the other sections need no floor */
                break;
            }
            s->tight[t] = s->total[t] && f == offset && offset + s->total[t] == s->capacity;
            tight |= s->tight[t];
        }
        if (ok && tight) ok = covered(s, lo, hi, list, m, offset, c->rank);
        for (int64_t j = undo_from; j < lifted; ++j) {
            int64_t u = s->trail[j].cell - s->minoff;
            s->mark[s->start[u] > lo ? s->start[u] : lo] = 0;
            s->mark[s->end[u] < hi ? s->end[u] : hi] = 0;
        }
        if (ok) {
            /* dynamic decomposition: boundaries inside b that no unplaced buffer spans now */
            int64_t first = s->start[b] > lo ? s->start[b] : lo;
            int64_t last = s->end[b] < hi ? s->end[b] : hi;
            int split = 0;
            for (int64_t t = first; t + 1 < last; ++t)
                if (--s->cuts[t] == 0) split = 1;
            if (!split) {
                code = search_nodes(s, lo, hi, list, m, offset, c->rank);
            } else {
                int64_t from = lo;
                code = FOUND;
                for (int64_t t = lo; t < hi && code == FOUND; ++t) {
                    if (t + 1 < hi && s->cuts[t] != 0) continue;
                    code = solve_partition(s, from, t + 1);
                    from = t + 1;
                }
            }
            for (int64_t t = first; t + 1 < last; ++t) ++s->cuts[t];
        }
        while (s->trail_len > undo_from) {
            --s->trail_len;
            *s->trail[s->trail_len].cell = s->trail[s->trail_len].old;
        }
        for (int64_t t = s->start[b]; t < s->end[b]; ++t) {
            s->total[t] += s->size[b];
            ++s->unplaced[t];  /* b is still right behind the unplaced ones */
        }
        s->offset[b] = -1;
        if (code == NOT_FOUND && hats == 0) break;  /* nothing above b: others add nothing */
    }
    free(cand);
    free(rest);
    return code;
}

/* Solve the buffers of sections [lo, hi) from a fresh canonical order.  Its lists are
 * sized by its members (partitions nest deep on traces: n-sized lists held 0.3 MB a
 * level at 18k buffers). */
static int solve_partition(Search *s, int64_t lo, int64_t hi) {
    int64_t m = members(s, lo, hi, NULL);
    if (m == 0) return FOUND;
    int64_t *list = malloc(sizeof(int64_t) * 3 * (size_t)m), *saved = list + m,
            *sorted = list + 2 * m;
    members(s, lo, hi, list);
    for (int64_t i = 0; i < m; ++i) saved[i] = s->rank[list[i]];
    memcpy(sorted, list, sizeof(int64_t) * (size_t)m);
    order(s, sorted, m);
    int code = search_nodes(s, lo, hi, sorted, m, 0, 0);
    for (int64_t i = 0; i < m; ++i) s->rank[list[i]] = saved[i];
    free(list);
    return code;
}

static int run(Search *s) {
    int64_t n = s->n, T = 0;
    for (int64_t b = 0; b < n; ++b) if (s->end[b] > T) T = s->end[b];
    s->T = T;
    int64_t *live = calloc((size_t)T + 1, sizeof(int64_t));
    s->floor = calloc((size_t)T + 1, sizeof(int64_t));
    s->total = calloc((size_t)T + 1, sizeof(int64_t));
    s->cuts = calloc((size_t)T + 1, sizeof(int64_t));
    s->mark = calloc((size_t)T + 1, sizeof(int64_t));
    s->tight = calloc((size_t)T + 1, 1);
    s->reach = calloc((size_t)T + 2, 1);
    s->head = malloc(sizeof(int64_t) * ((size_t)T + 1));
    for (int64_t t = 0; t <= T; ++t) s->head[t] = -1;
    s->next = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    s->sec_begin = calloc((size_t)T + 2, sizeof(int64_t));
    s->ov_begin = calloc((size_t)n + 1, sizeof(int64_t));
    s->rank = calloc((size_t)(n ? n : 1), sizeof(int64_t));
    s->offset = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    s->minoff = calloc((size_t)(n ? n : 1), sizeof(int64_t));
    for (int64_t b = 0; b < n; ++b) {
        s->offset[b] = -1;
        s->solution[b] = -1;
        for (int64_t t = s->start[b]; t < s->end[b]; ++t) {
            s->total[t] += s->size[b];
            ++live[t];
            if (t + 1 < s->end[b]) ++s->cuts[t];
        }
    }
    for (int64_t t = 0; t < T; ++t) s->sec_begin[t + 1] = s->sec_begin[t] + live[t];
    s->sec = malloc(sizeof(int64_t) * (size_t)(s->sec_begin[T] + 1));
    memset(live, 0, sizeof(int64_t) * (size_t)(T + 1));
    s->unplaced = calloc((size_t)T + 1, sizeof(int64_t));
    s->span_base = calloc((size_t)n + 1, sizeof(int64_t));
    for (int64_t b = 0; b < n; ++b) s->span_base[b + 1] = s->span_base[b] + s->end[b] - s->start[b];
    s->where = malloc(sizeof(int64_t) * (size_t)(s->span_base[n] + 1));
    for (int64_t b = 0; b < n; ++b)
        for (int64_t t = s->start[b]; t < s->end[b]; ++t) {
            s->where[s->span_base[b] + t - s->start[b]] = s->sec_begin[t] + live[t];
            s->sec[s->sec_begin[t] + live[t]++] = b;
        }
    memcpy(s->unplaced, live, sizeof(int64_t) * (size_t)(T + 1));
    /* overlaps: pairs of buffers live in one section (sweep in start order) */
    int64_t pairs = 0;
    for (int pass = 0; pass < 2; ++pass) {
        int64_t *fill = pass ? calloc((size_t)n + 1, sizeof(int64_t)) : NULL;
        for (int64_t a = 0; a < n; ++a)
            for (int64_t b = a + 1; b < n; ++b)
                if (s->start[a] < s->end[b] && s->start[b] < s->end[a]) {
                    if (!pass) {
                        ++s->ov_begin[a + 1];
                        ++s->ov_begin[b + 1];
                        ++pairs;
                    } else {
                        s->ov[s->ov_begin[a] + fill[a]++] = b;
                        s->ov[s->ov_begin[b] + fill[b]++] = a;
                    }
                }
        if (!pass) {
            for (int64_t b = 0; b < n; ++b) s->ov_begin[b + 1] += s->ov_begin[b];
            s->ov = malloc(sizeof(int64_t) * (size_t)(2 * pairs + 1));
        }
        free(fill);
    }
    int code = FOUND;
    int64_t from = 0;
    for (int64_t t = 0; t < T && code == FOUND; ++t) {
        if (t + 1 < T && s->cuts[t] != 0) continue;
        code = solve_partition(s, from, t + 1);
        from = t + 1;
    }
    if (T == 0) code = FOUND;
    free(live); free(s->floor); free(s->total); free(s->cuts); free(s->mark);
    free(s->tight); free(s->reach); free(s->head); free(s->next);
    free(s->sec_begin); free(s->sec); free(s->unplaced); free(s->span_base); free(s->where); free(s->ov_begin); free(s->ov);
    free(s->rank); free(s->offset); free(s->minoff); free(s->trail);
    return code;
}

static PyObject *search(PyObject *self, PyObject *args) {
    Py_buffer size, start, end, align, width, stop;
    const char *keys;
    Py_ssize_t nkeys;
    long long capacity, node_limit;
    double seconds;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*s#LLdw*", &size, &start, &end, &align, &width,
                          &keys, &nkeys, &capacity, &node_limit, &seconds, &stop))
        return NULL;
    Py_ssize_t n = size.len / (Py_ssize_t)sizeof(int64_t);
    PyObject *result = NULL;
    if (start.len != size.len || end.len != size.len || align.len != size.len ||
        width.len != size.len || stop.len < 1 || nkeys > 4) {
        PyErr_SetString(PyExc_ValueError, "search: arrays of unequal length, empty stop flag "
                        "or more than 4 keys");
        goto done;
    }
    int64_t *solution = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    Search s;
    memset(&s, 0, sizeof s);
    s.n = n;
    s.capacity = capacity;
    s.size = size.buf; s.start = start.buf; s.end = end.buf;
    s.align = align.buf; s.width = width.buf;
    s.keys = keys; s.nkeys = nkeys;
    s.solution = solution;
    s.node_limit = node_limit < 0 ? INT64_MAX : node_limit;
    s.stop = stop.buf;
    int code;
    Py_BEGIN_ALLOW_THREADS
    s.deadline = now() + (seconds < 0 ? 1e18 : seconds);
    code = run(&s);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(iy#L)", code, (const char *)solution,
                           (Py_ssize_t)(code == FOUND ? n * (Py_ssize_t)sizeof(int64_t) : 0),
                           (long long)s.nodes);
    free(solution);
done:
    PyBuffer_Release(&size); PyBuffer_Release(&start); PyBuffer_Release(&end);
    PyBuffer_Release(&align); PyBuffer_Release(&width); PyBuffer_Release(&stop);
    return result;
}

static PyMethodDef methods[] = {
    {"search", search, METH_VARARGS,
     "search(sizes, starts, ends, aligns, widths, keys, capacity, node_limit, seconds, stop)"
     " -> (code, offsets, nodes); see memplan.solver.canonical"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_canonical_kernel",
                                    "The compiled search of memplan.solver.canonical.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__canonical_kernel(void) { return PyModule_Create(&module); }
