/* The attention family for AVX2: nothing specialised yet; the scalar kernels. */
#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_kernels.h"

const cpu_attention_kernels cpu_attention_avx2 = {
    .exp_shift_sum = exp_shift_sum_scalar,
};
