/* The mixture-of-experts tensors of the Hugging Face importer, one layer at a time: Mixtral's
 * block_sparse_moe (gate, experts.E.w1 / w3 / w2) and Qwen2-MoE's mlp (gate, experts.E.gate_proj
 * / up_proj / down_proj, shared_expert, shared_expert_gate), placed in tripar's stacked tensors
 * (model/moe.c): the router's rows then the shared gate's in router_w, expert e of layer l at
 * dim-0 row l * experts + e of exp_gate_up_w (gate rows, then up rows) and exp_down_w. */
#include <stdio.h>

#include "io/import_hf_internal.h"

static void moe_add(hf_tensor *h, const char *dst, int layer, long row_offset, long rows,
                    long cols, const char *name) {
    snprintf(h->name, sizeof h->name, "%s", name);
    h->dst = dst;
    h->layer = layer;
    h->transpose = 0; /* nn.Linear is (out, in) already */
    h->row_offset = row_offset;
    h->ndims = 2;
    h->shape[0] = rows;
    h->shape[1] = cols;
}

int hf_moe_layer_tensors(const model_config *cfg, int layer, hf_tensor *out) {
    const long C = cfg->embd, M = cfg->mlp, S = cfg->shared_mlp, E = cfg->experts;
    const int mixtral = cfg->arch == ARCH_MIXTRAL;
    /* Mixtral's w1 is the gate, w3 the up and w2 the down projection */
    const char *block = mixtral ? "block_sparse_moe" : "mlp";
    const char *gate = mixtral ? "w1" : "gate_proj", *up = mixtral ? "w3" : "up_proj";
    const char *down = mixtral ? "w2" : "down_proj";
    char name[96];
    int n = 0;
    snprintf(name, sizeof name, "model.layers.%d.%s.gate.weight", layer, block);
    moe_add(&out[n++], "router_w", layer, 0, E, C, name);
    for (int e = 0; e < E; e++) {
        const int row = (int)(layer * E + e);
        snprintf(name, sizeof name, "model.layers.%d.%s.experts.%d.%s.weight", layer, block, e, gate);
        moe_add(&out[n++], "exp_gate_up_w", row, 0, M, C, name);
        snprintf(name, sizeof name, "model.layers.%d.%s.experts.%d.%s.weight", layer, block, e, up);
        moe_add(&out[n++], "exp_gate_up_w", row, M, M, C, name);
        snprintf(name, sizeof name, "model.layers.%d.%s.experts.%d.%s.weight", layer, block, e, down);
        moe_add(&out[n++], "exp_down_w", row, 0, C, M, name);
    }
    if (S == 0) return n;
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert_gate.weight", layer);
    moe_add(&out[n++], "router_w", layer, E, 1, C, name);
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert.gate_proj.weight", layer);
    moe_add(&out[n++], "sh_gate_up_w", layer, 0, S, C, name);
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert.up_proj.weight", layer);
    moe_add(&out[n++], "sh_gate_up_w", layer, S, S, C, name);
    snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert.down_proj.weight", layer);
    moe_add(&out[n++], "sh_down_w", layer, 0, C, S, name);
    return n;
}
