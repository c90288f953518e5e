/* How a micro-batch splits into nano-batches (nano_batch.h). */
#include "metrics/nano_batch.h"

static nano_batch nano_batch_of(int r0, int b0, int nb, int n_new, int pos0) {
    return (nano_batch){
        .r0 = r0, .rows = nb * n_new, .b0 = b0, .nb = nb, .n_new = n_new, .pos0 = pos0};
}

int nano_batch_split(nano_batch *out, int split, int seqs, int n_new, int pos0) {
    out[0] = nano_batch_of(0, 0, seqs, n_new, pos0);
    if (!split || n_new <= 1 || seqs < 1) return 1;
    if (seqs >= 2) {
        const int a = seqs / 2;
        out[0] = nano_batch_of(0, 0, a, n_new, pos0);
        out[1] = nano_batch_of(a * n_new, a, seqs - a, n_new, pos0);
        return 2;
    }
    const int half = n_new / 2, aligned = half / NANO_ALIGN * NANO_ALIGN;
    const int first = aligned > 0 ? aligned : half;
    out[0] = nano_batch_of(0, 0, 1, first, pos0);
    out[1] = nano_batch_of(first, 0, 1, n_new - first, pos0 + first);
    return 2;
}
