/* The mixture-of-experts rows of the size table (mixtral, qwen2_moe), in the place of Llama's
 * dense gate_up_w and down_w: the router (replicated), the routed experts and the optional
 * shared expert, each expert tensor-parallel exactly as the dense MLP is (gate|up column-split,
 * down row-split over the same units), so one all-reduce per layer sums them all.
 * The router is replicated, not sharded: every TP rank computes bit-identical logits and so
 * routes every token to the same experts without a collective. */
#include <math.h>

#include "model/model.h"

void model_tensor_table_moe(model *m, const model_config *cfg, const shard_geom *g) {
    weights *w = &m->w;
    const long L = cfg->layers, C = cfg->embd, M = cfg->mlp, E = cfg->experts;
    const long S = cfg->shared_mlp, R = E + (S > 0 ? 1 : 0);
    const int has_layers = g->n_layers > 0;
    /* An expert's rows for this stage's layers: layer l's experts are rows [l*E, (l+1)*E),
     * so a stage holds one contiguous run of them; with expert parallelism a rank holds its
     * run of experts_local of them in each layer's rows, the pattern repeated per layer. */
    const dim_slice layers = slice_one(g->layer_begin, g->n_layers);
    dim_slice layer_experts = slice_one((long)g->layer_begin * E, (long)g->n_layers * E);
    if (g->experts_local < E)
        layer_experts = (dim_slice){.start = {(long)g->layer_begin * E + g->expert_begin},
                                    .count = {g->experts_local},
                                    .nblocks = 1,
                                    .repeat = g->n_layers,
                                    .period = E};
    const dim_slice all_C = slice_full(C);
    /* the dense table's scales (llama.c): fan-in init, residual branches amplified x4; the
     * router's spread keeps its logits of order one, so routing is not a near tie */
    const float in_std = 1.0f / sqrtf((float)C), router_std = 2.0f / sqrtf((float)C);
    const float out_std = 4.0f / sqrtf((float)M), sh_out_std = S > 0 ? 4.0f / sqrtf((float)S) : 0;
    // clang-format off
    const table_row rows[] = {
        /* name            slot                       int8 scales          init         std         present            dims shape            slice */
        {"router_w",       (void **)&w->router_w,     NULL,                INIT_NORMAL, router_std, has_layers,        3, {L, R, C},         {layers, slice_full(R), all_C}},
        {"exp_gate_up_w",  &w->exp_gate_up_w,         &w->exp_gate_up_s,   INIT_NORMAL, in_std,     has_layers,        3, {L * E, 2 * M, C}, {layer_experts, slice_gate_up_of(M, g->mlp_begin, g->mlp_local), all_C}},
        {"exp_down_w",     &w->exp_down_w,            &w->exp_down_s,      INIT_NORMAL, out_std,    has_layers,        3, {L * E, C, M},     {layer_experts, all_C, slice_one(g->mlp_begin, g->mlp_local)}},
        {"sh_gate_up_w",   &w->sh_gate_up_w,          &w->sh_gate_up_s,    INIT_NORMAL, in_std,     has_layers,        3, {L, 2 * S, C},     {layers, slice_gate_up_of(S, g->shared_begin, g->shared_local), all_C}},
        {"sh_down_w",      &w->sh_down_w,             &w->sh_down_s,       INIT_NORMAL, sh_out_std, has_layers,        3, {L, C, S},         {layers, all_C, slice_one(g->shared_begin, g->shared_local)}},
    };
    // clang-format on
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (S == 0 && (rows[i].slot == &w->sh_gate_up_w || rows[i].slot == &w->sh_down_w))
            continue;
        model_add_row(m, rows[i]);
    }
}
