/* The matmul family for AVX-512 with VNNI: the int8 decode GEMV on int8 dot products
 * (vpdpbusd, matmul_q8_avx512vnni.c); everything else is the AVX-512 level's. */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/cpu/matmul_isa.h"
#include "kernels/cpu/matmul_kernels.h"

const cpu_matmul_kernels cpu_matmul_avx512vnni = {
    .gemv_f32 = gemv_f32_avx512,
    .round_bf16 = round_bf16_avx512,
    .gemv_bf16 = gemv_bf16_avx512,
    .gemm_bf16 = NULL,
    .gemm_bf16_pack_bytes = NULL,
    .quantize_q8 = quantize_q8_avx512,
    .gemv_q8 = gemv_q8_avx512vnni,
    .gemv_blocks = gemv_blocks_avx512vnni,
    .gemm_blocks = gemm_blocks_avx512vnni,
    .gemm_blocks_pack_bytes = gemm_blocks_pack_bytes_avx512vnni,
};
