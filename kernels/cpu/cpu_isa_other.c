/* Processors other than x86-64: the portable kernels only. */
#include <stddef.h>

#include "kernels/cpu/cpu_isa.h"

cpu_isa cpu_isa_detect(void) { return CPU_ISA_SCALAR; }

const char *cpu_isa_detect_why(void) { return "not an x86-64 processor"; }

static const cpu_kernel_set CPU_KERNEL_SET_SCALAR = {CPU_ISA_SCALAR, &cpu_matmul_scalar,
                                                     &cpu_attention_scalar, &cpu_activation_scalar};

const cpu_kernel_set *cpu_kernel_set_for(cpu_isa isa) {
    return isa == CPU_ISA_SCALAR ? &CPU_KERNEL_SET_SCALAR : NULL;
}
