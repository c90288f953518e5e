/* The building blocks of a size table, shared by the GPT-2 rows (model.c) and the Llama rows
 * (llama.c): a rank's slice of one dimension, adding a row, and the quantised copy of a tied
 * LM head. They call neither table, so neither family's file calls the other's. */
#include <string.h>

#include "base/check.h"
#include "model/model.h"

dim_slice slice_full(long n) { return (dim_slice){.start = {0}, .count = {n}, .nblocks = 1}; }
dim_slice slice_one(long start, long count) {
    return (dim_slice){.start = {start}, .count = {count}, .nblocks = 1};
}

dim_slice slice_gate_up_of(long n, long begin, long count) {
    dim_slice s = {.nblocks = 2};
    s.start[0] = begin;
    s.count[0] = count;
    s.start[1] = n + begin;
    s.count[1] = count;
    return s;
}

void model_add_row(model *m, table_row r) {
    CHECK(m->n_tensors < MODEL_MAX_TENSORS, "size table overflow");
    tensor_desc *t = &m->tensors[m->n_tensors++];
    memset(t, 0, sizeof *t);
    t->name = r.name;
    t->ndims = r.ndims;
    for (int d = 0; d < r.ndims; d++) {
        t->global_shape[d] = r.shape[d];
        t->local[d] = r.local[d];
    }
    t->is_matrix = r.scale_slot != NULL;
    /* the row-parallel matrices, by their slots (both families reuse them) */
    const int down = r.slot == &m->w.fc2_w || r.slot == &m->w.exp_down_w ||
                     r.slot == &m->w.sh_down_w;
    t->input = r.slot == &m->w.proj_w ? MATRIX_INPUT_HEADS
               : down                 ? MATRIX_INPUT_MLP
                                      : MATRIX_INPUT_WHOLE;
    t->scale_rows_dim = r.ndims - 1;
    t->slot = r.slot;
    t->scale_slot = r.scale_slot;
    t->init = r.init;
    t->init_std = r.std;
    t->present = r.present;
    t->index = m->n_tensors - 1;
}

void model_add_head_copy(model *m, const shard_geom *g, float wte_std) {
    const long C = m->cfg.embd, V = m->cfg.vocab;
    /* Named wte, so it reads the same checkpoint dataset and synthetic values as wte; the
     * checkpoint code finds wte itself first (model_find_tensor) and stores the copy from
     * the same shard (checkpoint.c). */
    const table_row copy = {
        "wte",       &m->w.head_w, &m->w.head_s,
        INIT_NORMAL, wte_std,      g->last_stage,
        2,           {V, C},       {slice_one(g->vocab_begin, g->vocab_local), slice_full(C)}};
    model_add_row(m, copy);
}
