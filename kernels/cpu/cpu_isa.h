/* The instruction-set levels the CPU kernels are built for, what this CPU offers (cpuid), and
 * the kernel tables of each level. A level includes every level before it; the backend runs the
 * best one the CPU and its OS support, or the one the job names (backend.cpu_isa), so one
 * binary runs everywhere and the tests can run every path the machine has. */
#pragma once

#include "kernels/cpu/activation_kernels.h"
#include "kernels/cpu/attention_kernels.h"
#include "kernels/cpu/matmul_kernels.h"

typedef enum {
    CPU_ISA_SCALAR = 0,  /* portable C: any x86-64, and other processors */
    CPU_ISA_AVX2,        /* AVX2, FMA, F16C (Haswell, Zen 1-3) */
    CPU_ISA_AVX512,      /* AVX-512 F, BW, VL, DQ (Skylake-SP) */
    CPU_ISA_AVX512_VNNI, /* and VNNI int8 dot products (Cascade Lake, Ice Lake) */
    CPU_ISA_AVX512_BF16, /* and BF16 dot products (Cooper Lake, Sapphire Rapids, Zen 4) */
    CPU_ISA_AMX_BF16,    /* and AMX tiles with BF16 (Sapphire Rapids), the OS granting them */
    CPU_ISA_COUNT
} cpu_isa;

/* "scalar", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx_bf16" */
const char *cpu_isa_name(cpu_isa isa);
/* The level called name, or -1. */
int cpu_isa_from_name(const char *name);
/* The levels' names joined by ", " (for messages). */
const char *cpu_isa_names(void);

/* The best level this CPU and OS support: each feature's cpuid bit, and XGETBV showing that
 * the OS saves the AVX (and, for AVX-512, the opmask and upper ZMM) registers; for AMX the tile
 * state in XCR0 and, on Linux, the process's permission to use tiles, which detection asks for.
 * Scalar on processors other than x86-64. */
cpu_isa cpu_isa_detect(void);
/* What the level above cpu_isa_detect()'s needs and this machine lacks, in words ("" at the top
 * level): for the messages that refuse a level. */
const char *cpu_isa_detect_why(void);

/* Every family's kernels for one level. A family a level does not specialise points to the
 * best table below it. */
typedef struct {
    cpu_isa isa;
    const cpu_matmul_kernels *matmul;
    const cpu_attention_kernels *attention;
    const cpu_activation_kernels *activation;
} cpu_kernel_set;

/* The kernels of a level this build has (all of them on x86-64, scalar elsewhere); NULL for a
 * level it lacks. */
const cpu_kernel_set *cpu_kernel_set_for(cpu_isa isa);
