/* Names of the CPU instruction-set levels (kernels/cpu/cpu_isa.h). */
#include <string.h>

#include "kernels/cpu/cpu_isa.h"

static const char *const CPU_ISA_NAMES[CPU_ISA_COUNT] = {"scalar",      "avx2",        "avx512",
                                                         "avx512_vnni", "avx512_bf16", "amx_bf16"};

const char *cpu_isa_name(cpu_isa isa) {
    return isa >= 0 && isa < CPU_ISA_COUNT ? CPU_ISA_NAMES[isa] : "unknown";
}

int cpu_isa_from_name(const char *name) {
    for (int i = 0; i < CPU_ISA_COUNT; i++)
        if (name && !strcmp(name, CPU_ISA_NAMES[i])) return i;
    return -1;
}

const char *cpu_isa_names(void) {
    return "scalar, avx2, avx512, avx512_vnni, avx512_bf16, amx_bf16";
}
