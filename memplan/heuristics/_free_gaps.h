/* The free address gaps of the time sweep (memplan.heuristics.time_sweep): a treap and hash tables,
 * O(log g) a take or a give for g gaps, where sorted arrays moved O(g) entries each (4 s of
 * the sweep of a 10^6-buffer training step).
 *
 *   address
 *     ^   free gaps at step t:  [..)     [.....)        [..... top (open above)
 *     |   +----+     +--+             +---+
 *     |   | a  |     |b |             | c |   units a, b, c live at t
 *     +---+----+-----+--+-------------+---+--> address ranges at step t
 *
 * - `ends`: the gaps by either end, lo -> hi and hi -> lo, in hash tables: the gaps a
 *   give merges with, O(1); the open top gap (hi = TOP) is kept apart;
 * - `at`, for first fit only: the gaps [lo, hi) in a treap keyed by (lo, hi); each node
 *   keeps the largest gap size below it, so that the lowest gap that fits is found by one
 *   descent that skips every subtree too small;
 * - `fit`, for best fit only: the finite gaps in a treap keyed by (size, lo); from
 *   (extent, -1) on, the first whose aligned base fits (sizes that fit but alignments that
 *   do not are stepped over one successor search at a time, rare: most bases are aligned
 *   already).
 *
 * Both give exactly the gaps of time_sweep.FreeList, the plain sorted lists of its Python
 * twin (same keys, same ties); the tree shapes, set by the nodes' pseudo-random
 * priorities, never change which gap is found. Memory: a node and two table slots per gap.
 */
#ifndef MEMPLAN_FREE_GAPS_H
#define MEMPLAN_FREE_GAPS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TOP INT64_MAX
#define NONE (-1)

typedef struct { int64_t a, b; } Pair; /* at: (lo, hi); fit: (hi - lo, lo) */

typedef struct {
    Pair key;
    int64_t most;        /* the largest b - a in the subtree (read in `at` only) */
    int64_t left, right; /* node numbers, NONE for none */
    uint64_t priority;   /* a heap over these keeps the tree balanced, expected */
} Node;

/* An open-addressing table from one end of a gap to the other (linear probing; a slot
 * whose key is NONE is empty; deletion shifts the run back, no tombstones). */
typedef struct { int64_t *key, *value; uint64_t mask; } Ends;

typedef struct {
    Node *node;
    int64_t *spare; /* numbers of freed nodes, reused first */
    int64_t used, spares, room;
    uint64_t state; /* of the priorities' xorshift */
    int64_t at, fit; /* the two roots: `at` for first fit, `fit` for best fit */
    int sized;       /* best fit: `fit` kept, else `at` */
    Ends by_lo, by_hi; /* the finite gaps by their lo and by their hi */
    int64_t top;       /* the lo of the open top gap */
} FreeGaps;

static uint64_t slot_of(const Ends *e, int64_t key) {
    return ((uint64_t)key * 0x9E3779B97F4A7C15u >> 17) & e->mask;
}

static void ends_put(Ends *e, int64_t key, int64_t value) {
    uint64_t i = slot_of(e, key);
    while (e->key[i] != NONE) i = (i + 1) & e->mask;
    e->key[i] = key;
    e->value[i] = value;
}

/* The value of key, NONE when absent; with `drop`, the key leaves the table. */
static int64_t ends_get(Ends *e, int64_t key, int drop) {
    uint64_t i = slot_of(e, key);
    while (e->key[i] != key) {
        if (e->key[i] == NONE) return NONE;
        i = (i + 1) & e->mask;
    }
    int64_t value = e->value[i];
    if (!drop) return value;
    for (uint64_t j = (i + 1) & e->mask; e->key[j] != NONE; j = (j + 1) & e->mask) {
        uint64_t home = slot_of(e, e->key[j]); /* j's run may move back into slot i */
        if (((j - home) & e->mask) >= ((j - i) & e->mask)) {
            e->key[i] = e->key[j];
            e->value[i] = e->value[j];
            i = j;
        }
    }
    e->key[i] = NONE;
    return value;
}

static int pair_less(Pair x, Pair y) { return x.a < y.a || (x.a == y.a && x.b < y.b); }

static int64_t most_of(const FreeGaps *f, int64_t t) { return t == NONE ? -1 : f->node[t].most; }

static void refresh(FreeGaps *f, int64_t t) {
    Node *n = &f->node[t];
    int64_t most = n->key.b - n->key.a, l = most_of(f, n->left), r = most_of(f, n->right);
    n->most = most > l ? (most > r ? most : r) : (l > r ? l : r);
}

/* Tree t split into the keys below `key` (*low) and the others (*high). */
static void split(FreeGaps *f, int64_t t, Pair key, int64_t *low, int64_t *high) {
    if (t == NONE) { *low = *high = NONE; return; }
    if (pair_less(f->node[t].key, key)) {
        split(f, f->node[t].right, key, &f->node[t].right, high);
        *low = t;
    } else {
        split(f, f->node[t].left, key, low, &f->node[t].left);
        *high = t;
    }
    refresh(f, t);
}

/* Trees low and high, every key of low below every key of high, joined. */
static int64_t merge(FreeGaps *f, int64_t low, int64_t high) {
    if (low == NONE) return high;
    if (high == NONE) return low;
    if (f->node[low].priority > f->node[high].priority) {
        f->node[low].right = merge(f, f->node[low].right, high);
        refresh(f, low);
        return low;
    }
    f->node[high].left = merge(f, low, f->node[high].left);
    refresh(f, high);
    return high;
}

/* Node x into subtree t: down to where its priority ranks it, then the subtree below is
 * split around it (expected O(1) nodes). The subtree's new root. */
static int64_t insert_at(FreeGaps *f, int64_t t, int64_t x) {
    if (t == NONE) return x;
    Node *n = &f->node[t];
    if (f->node[x].priority > n->priority) {
        split(f, t, f->node[x].key, &f->node[x].left, &f->node[x].right);
        refresh(f, x);
        return x;
    }
    if (pair_less(f->node[x].key, n->key)) n->left = insert_at(f, n->left, x);
    else n->right = insert_at(f, n->right, x);
    refresh(f, t);
    return t;
}

/* The node of `key` (present) out of subtree t, its children merged in its place. */
static int64_t erase_at(FreeGaps *f, int64_t t, Pair key) {
    Node *n = &f->node[t];
    if (n->key.a == key.a && n->key.b == key.b) {
        f->spare[f->spares++] = t;
        return merge(f, n->left, n->right);
    }
    if (pair_less(key, n->key)) n->left = erase_at(f, n->left, key);
    else n->right = erase_at(f, n->right, key);
    refresh(f, t);
    return t;
}

static void tree_add(FreeGaps *f, int64_t *root, Pair key) {
    int64_t t = f->spares ? f->spare[--f->spares] : f->used++;
    f->state ^= f->state << 13; f->state ^= f->state >> 7; f->state ^= f->state << 17;
    f->node[t] = (Node){key, key.b - key.a, NONE, NONE, f->state};
    *root = insert_at(f, *root, t);
}

/* The node of the first key not below `key`, NONE when there is none. */
static int64_t lower_bound(const FreeGaps *f, int64_t t, Pair key) {
    int64_t found = NONE;
    while (t != NONE) {
        if (pair_less(f->node[t].key, key)) t = f->node[t].right;
        else { found = t; t = f->node[t].left; }
    }
    return found;
}

static int64_t aligned(int64_t at, int64_t residue, int64_t modulus);

/* The lowest gap of subtree t whose aligned base fits `extent` bytes, NONE for none: the
 * subtrees whose largest gap is smaller are skipped. The open top always fits. */
static int64_t lowest_fit(const FreeGaps *f, int64_t t, int64_t extent, int64_t residue,
                          int64_t modulus) {
    if (t == NONE || f->node[t].most < extent) return NONE;
    int64_t found = lowest_fit(f, f->node[t].left, extent, residue, modulus);
    if (found != NONE) return found;
    Pair g = f->node[t].key;
    if (g.b == TOP || (g.b - g.a >= extent && aligned(g.a, residue, modulus) + extent <= g.b))
        return t;
    return lowest_fit(f, f->node[t].right, extent, residue, modulus);
}

static void gaps_free(FreeGaps *f) {
    free(f->node); free(f->spare);
    free(f->by_lo.key); free(f->by_lo.value); free(f->by_hi.key); free(f->by_hi.value);
}

/* Room for n gaps at once: 0, or -1 when out of memory. */
static int gaps_init(FreeGaps *f, int64_t n, int sized) {
    uint64_t slots = 16;
    while (slots < 2 * (uint64_t)n) slots *= 2; /* at most half full */
    f->room = n + 1;
    f->node = malloc(sizeof(Node) * (size_t)f->room);
    f->spare = malloc(sizeof(int64_t) * (size_t)f->room);
    Ends *tables[2] = {&f->by_lo, &f->by_hi};
    for (int t = 0; t < 2; t++) {
        tables[t]->mask = slots - 1;
        tables[t]->key = malloc(sizeof(int64_t) * slots);
        tables[t]->value = malloc(sizeof(int64_t) * slots);
        if (tables[t]->key) memset(tables[t]->key, 0xff, sizeof(int64_t) * slots); /* NONE */
    }
    f->used = f->spares = 0;
    f->state = 0x9E3779B97F4A7C15u;
    f->at = f->fit = NONE;
    f->sized = sized;
    f->top = NONE;
    if (f->node && f->spare && f->by_lo.key && f->by_lo.value && f->by_hi.key
        && f->by_hi.value)
        return 0;
    gaps_free(f);
    return -1;
}

static void gaps_insert(FreeGaps *f, int64_t lo, int64_t hi) {
    if (hi == TOP) f->top = lo;
    else {
        ends_put(&f->by_lo, lo, hi);
        ends_put(&f->by_hi, hi, lo);
    }
    if (!f->sized) tree_add(f, &f->at, (Pair){lo, hi});
    else if (hi != TOP) tree_add(f, &f->fit, (Pair){hi - lo, lo});
}

static void gaps_remove(FreeGaps *f, Pair g) {
    if (g.b != TOP) {
        ends_get(&f->by_lo, g.a, 1);
        ends_get(&f->by_hi, g.b, 1);
    }
    if (!f->sized) f->at = erase_at(f, f->at, g);
    else if (g.b != TOP) f->fit = erase_at(f, f->fit, (Pair){g.b - g.a, g.a});
}

/* The gap to take: the smallest that fits (by (size, lo)) or the lowest that fits. */
static Pair gaps_chosen(const FreeGaps *f, int64_t extent, int64_t residue, int64_t modulus,
                        int best) {
    if (best) {
        for (int64_t k = lower_bound(f, f->fit, (Pair){extent, -1}); k != NONE;
             k = lower_bound(f, f->fit, (Pair){f->node[k].key.a, f->node[k].key.b + 1})) {
            int64_t size = f->node[k].key.a, lo = f->node[k].key.b;
            if (aligned(lo, residue, modulus) + extent <= lo + size)
                return (Pair){lo, lo + size};
        }
        return (Pair){f->top, TOP};
    }
    return f->node[lowest_fit(f, f->at, extent, residue, modulus)].key;
}

/* The base of `extent` bytes (base % modulus == residue); the gap taken shrinks. */
static int64_t gaps_take(FreeGaps *f, int64_t extent, int64_t residue, int64_t modulus,
                         int best) {
    Pair g = gaps_chosen(f, extent, residue, modulus, best);
    int64_t base = aligned(g.a, residue, modulus);
    gaps_remove(f, g);
    if (g.b > base + extent) gaps_insert(f, base + extent, g.b);
    if (base > g.a) gaps_insert(f, g.a, base);
    return base;
}

/* Bytes [lo, hi) free again, merged with the gaps they touch. */
static void gaps_give(FreeGaps *f, int64_t lo, int64_t hi) {
    int64_t under = ends_get(&f->by_hi, lo, 0);
    if (under != NONE) {
        gaps_remove(f, (Pair){under, lo});
        lo = under;
    }
    int64_t over = hi == f->top ? TOP : ends_get(&f->by_lo, hi, 0);
    if (over != NONE) {
        gaps_remove(f, (Pair){hi, over});
        hi = over;
    }
    gaps_insert(f, lo, hi);
}

#endif
