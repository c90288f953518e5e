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

/* Joined from the table once, so a new level cannot be missing from the messages that list
 * them (called from the backend's init and its errors, on the rank's main thread). */
const char *cpu_isa_names(void) {
    static char list[128];
    if (!list[0])
        for (int i = 0; i < CPU_ISA_COUNT; i++) {
            if (i) strcat(list, ", ");
            strcat(list, CPU_ISA_NAMES[i]);
        }
    return list;
}
