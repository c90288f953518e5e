/* What explain's bucket kinds are (explain.h): leaves, waits and own work by phase name, the
 * table's row order, and the words for kinds and quantities. The bottom of explain's files:
 * every other one calls these. */
#include <string.h>

#include "analysis/explain.h"

/* Leaves are the phases that enclose no other phase; tp_allreduce spans compute and its
 * exposed part is recorded as tp_wait, as ep_dispatch's and ep_combine's is as ep_wait. */
int explain_kind_is_leaf(int p) {
    return p >= 0 && p < PHASE_COUNT && p != PHASE_STEP && p != PHASE_ITERATION &&
           p != PHASE_WEIGHT_INIT && p != PHASE_TP_ALLREDUCE && p != PHASE_EP_DISPATCH &&
           p != PHASE_EP_COMBINE;
}

int explain_kind_is_wait(int kind) {
    if (!explain_kind_is_leaf(kind)) return 0;
    const char *name = phase_name((phase)kind);
    size_t n = strlen(name);
    return kind == PHASE_PP_SEND || kind == PHASE_DP_GATHER ||
           (n >= 5 && !strcmp(name + n - 5, "_wait"));
}

int explain_kind_is_work(int kind) { return explain_kind_is_leaf(kind) && !explain_kind_is_wait(kind); }

int explain_row_kinds(int kinds[EXPLAIN_KIND_COUNT]) {
    /* the forward pass's order first; any other leaf after its group, in enum order */
    static const int work_order[] = {PHASE_EMBED,     PHASE_NORM,          PHASE_QKV_GEMM,
                                     PHASE_ATTENTION, PHASE_ATTN_OUT_GEMM, PHASE_MLP_GEMM,
                                     PHASE_HEAD,      PHASE_SAMPLE};
    static const int wait_order[] = {PHASE_TP_WAIT, PHASE_PP_RECV_WAIT, PHASE_PP_SEND,
                                     PHASE_DP_GATHER};
    char listed[EXPLAIN_KIND_COUNT] = {0};
    int n = 0;
    for (size_t i = 0; i < sizeof work_order / sizeof work_order[0]; i++)
        listed[kinds[n++] = work_order[i]] = 1;
    for (int k = 0; k < PHASE_COUNT; k++)
        if (explain_kind_is_work(k) && !listed[k]) listed[kinds[n++] = k] = 1;
    for (size_t i = 0; i < sizeof wait_order / sizeof wait_order[0]; i++)
        listed[kinds[n++] = wait_order[i]] = 1;
    for (int k = 0; k < PHASE_COUNT; k++)
        if (explain_kind_is_wait(k) && !listed[k]) listed[kinds[n++] = k] = 1;
    kinds[n++] = EXPLAIN_HOST_GAP;
    return n;
}

const char *explain_kind_name(int kind) {
    return kind == EXPLAIN_HOST_GAP ? "host_gap" : phase_name((phase)kind);
}

const char *explain_kind_words(int kind) {
    switch (kind) {
    case PHASE_TP_WAIT: return "exposed TP all-reduce";
    case PHASE_PP_RECV_WAIT: return "PP wait / pipeline bubble";
    case PHASE_PP_SEND: return "PP send";
    case PHASE_DP_GATHER: return "DP gather";
    case PHASE_SAMPLE_WAIT: return "exposed sampling collective";
    case PHASE_NLL_WAIT: return "exposed perplexity reduction";
    case PHASE_STOP_WAIT: return "stop vote wait";
    case PHASE_EP_WAIT: return "exposed EP all-to-all";
    case EXPLAIN_HOST_GAP: return "idle between recorded phases";
    default: return "";
    }
}

const char *explain_qty_name(explain_qty q) {
    static const char *const names[EXPLAIN_QTY_COUNT] = {"ttft", "tpot", "e2e"};
    return names[q];
}

