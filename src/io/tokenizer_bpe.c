/* The BPE merge step (tokenizer_impl.h): the merge table keyed by id pairs, and merging by a
 * 4-ary heap over a linked list, so a piece of n bytes costs O(n log n), not O(n^2). */
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/tokenizer_impl.h"

/* A candidate pair as one key, rank in the high half and the left symbol's position in the
 * low half, so one compare orders by rank, then position. */
typedef uint64_t bpe_key;
struct bpe_entry {
    bpe_key key;
};

static uint64_t pair_key(int32_t left, int32_t right) {
    return ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
}

static size_t pair_slot(const tok_merge_map *m, uint64_t key) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h ^ (h >> 29)) & (m->cap - 1);
    while (m->slots[i].key && m->slots[i].key != key) i = (i + 1) & (m->cap - 1);
    return i;
}

void tok_merge_map_init(tok_merge_map *m, size_t expected) {
    m->cap = 16;
    while (m->cap < 2 * expected + 16) m->cap *= 2;
    m->slots = xcalloc(m->cap, sizeof *m->slots);
    m->count = 0;
}

void tok_merge_map_free(tok_merge_map *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

void tok_merge_map_put(tok_merge_map *m, int32_t left, int32_t right, int32_t rank,
                       int32_t merged, int keep_first) {
    uint64_t key = pair_key(left, right);
    tok_merge_slot *s = &m->slots[pair_slot(m, key)];
    if (s->key && keep_first) return;
    if (!s->key) {
        CHECK(2 * (m->count + 1) <= m->cap, "merge table sized too small");
        s->key = key;
        m->count++;
    }
    s->rank = rank;
    s->merged = merged;
}

int tok_merge_map_get(const tok_merge_map *m, int32_t left, int32_t right, int32_t *rank,
                      int32_t *merged) {
    if (!m->cap) return 0;
    const tok_merge_slot *s = &m->slots[pair_slot(m, pair_key(left, right))];
    if (!s->key) return 0;
    *rank = s->rank;
    *merged = s->merged;
    return 1;
}

void bpe_work_free(bpe_work *w) {
    free(w->prev);
    free(w->next);
    free(w->heap);
    free(w->deferred);
    memset(w, 0, sizeof *w);
}

/* A 4-ary heap: half the depth of a binary one, and the four children of a node share a cache
 * line, which matters once a 1 MB piece's heap (millions of entries) outgrows the caches. */
static void heap_sift_down(bpe_work *w, size_t n, size_t i) {
    struct bpe_entry *h = w->heap;
    bpe_key moving = h[i].key;
    for (;;) {
        size_t c = 4 * i + 1, best = c;
        if (c >= n) break;
        size_t last = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < last; k++)
            if (h[k].key < h[best].key) best = k;
        if (h[best].key >= moving) break;
        h[i] = h[best];
        i = best;
        w->steps++;
    }
    h[i].key = moving;
    w->steps++;
}

static void heap_push(bpe_work *w, size_t *n, bpe_key key) {
    struct bpe_entry *h = w->heap;
    size_t i = (*n)++;
    while (i > 0 && key < h[(i - 1) / 4].key) {
        h[i] = h[(i - 1) / 4];
        i = (i - 1) / 4;
        w->steps++;
    }
    h[i].key = key;
    w->steps++;
}

static bpe_key heap_pop(bpe_work *w, size_t *n) {
    bpe_key top = w->heap[0].key;
    w->heap[0] = w->heap[--*n];
    if (*n > 0) heap_sift_down(w, *n, 0);
    return top;
}

static bpe_key key_of(int32_t rank, int32_t pos) {
    return (bpe_key)(uint32_t)rank << 32 | (uint32_t)pos;
}

/* Queues the pair starting at symbol pos when it has a merge: on the heap, or, in GPT-2 rounds,
 * held back while the round of rank `round` lasts when it ranks no later than that. */
static void pair_queue(const tok_merge_map *m, bpe_work *w, size_t *hn, size_t *nd,
                       const int32_t *ids, int32_t pos, int64_t round) {
    int32_t rank, merged, right = w->next[pos];
    if (right < 0 || !tok_merge_map_get(m, ids[pos], ids[right], &rank, &merged)) return;
    if (rank <= round)
        w->deferred[(*nd)++] = key_of(rank, pos);
    else
        heap_push(w, hn, key_of(rank, pos));
}

/* Every pair of the text is queued when it forms and looked at when it surfaces; an entry whose
 * pair has since changed (a neighbour merged) is dropped then. A merge keeps its left symbol's
 * position, so (rank, position) takes the leftmost of the best pairs, as Hugging Face's queue
 * and tiktoken do. GPT-2's encoder.py instead merges every occurrence of the best pair in one
 * left-to-right pass before it looks again; the two differ only when a merge forms a pair that
 * ranks before the one being merged (a token made by two merges can do that), and `rounds`
 * gives GPT-2's order by holding such pairs back until the round ends. At most n - 1 merges,
 * each queueing two pairs: the heap never holds more than 3n entries. */
int bpe_merge(const tok_merge_map *m, int32_t *ids, int n, int rounds, bpe_work *w) {
    if (n < 2) return n;
    if ((size_t)n > w->cap) {
        free(w->prev);
        free(w->next);
        free(w->heap);
        free(w->deferred);
        w->cap = (size_t)n;
        w->prev = xmalloc(w->cap * sizeof *w->prev);
        w->next = xmalloc(w->cap * sizeof *w->next);
        w->heap = xmalloc(3 * w->cap * sizeof *w->heap);
        w->deferred = xmalloc(2 * w->cap * sizeof *w->deferred);
    }
    for (int i = 0; i < n; i++) {
        w->prev[i] = i - 1;
        w->next[i] = i + 1 < n ? i + 1 : -1;
    }
    size_t hn = 0, nd = 0;
    for (int i = 0; i + 1 < n; i++) { /* the text's own pairs, then one O(n) heapify */
        int32_t rank, merged;
        if (tok_merge_map_get(m, ids[i], ids[i + 1], &rank, &merged))
            w->heap[hn++].key = key_of(rank, i);
    }
    for (size_t i = hn > 1 ? (hn - 2) / 4 + 1 : 0; i-- > 0;) heap_sift_down(w, hn, i);
    int64_t round = -1; /* rank of the GPT-2 round under way; -1 holds nothing back */
    while (hn > 0 || nd > 0) {
        if (nd > 0 && (hn == 0 || (int64_t)(w->heap[0].key >> 32) != round)) {
            for (size_t i = 0; i < nd; i++) heap_push(w, &hn, w->deferred[i]); /* round over */
            nd = 0;
            round = -1;
            continue;
        }
        bpe_key key = heap_pop(w, &hn);
        int32_t pos = (int32_t)(uint32_t)key, right = w->next[pos], rank, merged;
        /* a merged-away symbol has id -1; a rank names one pair, so equal rank = same pair */
        if (ids[pos] < 0 || right < 0 ||
            !tok_merge_map_get(m, ids[pos], ids[right], &rank, &merged) ||
            (uint32_t)rank != (uint32_t)(key >> 32))
            continue;
        if (rounds) round = rank;
        ids[pos] = merged;
        ids[right] = -1;
        w->next[pos] = w->next[right];
        if (w->next[right] >= 0) w->prev[w->next[right]] = pos;
        if (w->prev[pos] >= 0) pair_queue(m, w, &hn, &nd, ids, w->prev[pos], round);
        pair_queue(m, w, &hn, &nd, ids, pos, round);
    }
    int k = 0;
    for (int32_t i = 0; i >= 0; i = w->next[i]) ids[k++] = ids[i]; /* symbol 0 never dies */
    return k;
}
