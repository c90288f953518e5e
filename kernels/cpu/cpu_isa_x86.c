/* x86-64: what the CPU offers, read from cpuid and XGETBV, and the kernel tables of every
 * level (all compiled in; each ISA file is built for its own level only). */
#include <cpuid.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/cpu/cpu_isa.h"

/* cpuid bits (Intel SDM vol. 2A, CPUID; AMD APM vol. 3 agrees) */
enum {
    LEAF1_ECX_FMA = 1u << 12,
    LEAF1_ECX_OSXSAVE = 1u << 27,
    LEAF1_ECX_AVX = 1u << 28,
    LEAF1_ECX_F16C = 1u << 29,
    LEAF7_EBX_AVX2 = 1u << 5,
    LEAF7_EBX_AVX512F = 1u << 16,
    LEAF7_EBX_AVX512DQ = 1u << 17,
    LEAF7_EBX_AVX512BW = 1u << 30,
    LEAF7_EBX_AVX512VL = 1u << 31,
    LEAF7_ECX_AVX512VNNI = 1u << 11,
    LEAF7_EDX_AMX_BF16 = 1u << 22,
    LEAF7_EDX_AMX_TILE = 1u << 24,
    LEAF7_1_EAX_AVX512BF16 = 1u << 5,
};
/* XCR0: the register state the OS saves on a context switch. */
enum {
    XCR0_AVX = (1u << 1) | (1u << 2),                /* XMM, YMM */
    XCR0_AVX512 = (1u << 5) | (1u << 6) | (1u << 7), /* opmask, ZMM0-15 high, ZMM16-31 */
    XCR0_AMX = (1u << 17) | (1u << 18),              /* XTILECFG, XTILEDATA */
};
/* Linux hands out the 8 KiB of tile data only to a process that asks (arch/x86/include/uapi/
 * asm/prctl.h); without it the first tile instruction faults. */
enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static int all(uint32_t reg, uint32_t bits) { return (reg & bits) == bits; }

/* Asks for tile data for the whole process, threads started later included; asking again once
 * granted returns 0 again. Non-zero where the kernel is older than 5.16 or refuses. */
static int amx_permission(void) {
    return (int)syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA);
}

/* The best level, and in *why what the level above it needs that is missing. */
static cpu_isa detect(const char **why) {
    unsigned a, b, c, d;
    *why = "no cpuid leaf 1";
    if (!__get_cpuid(1, &a, &b, &c, &d)) return CPU_ISA_SCALAR;
    const unsigned ecx1 = c;
    // Without OSXSAVE the OS may not save YMM/ZMM state, whatever the feature bits say.
    *why = "no AVX, or the OS does not save its registers (OSXSAVE)";
    if (!all(ecx1, LEAF1_ECX_OSXSAVE | LEAF1_ECX_AVX)) return CPU_ISA_SCALAR;
    const uint64_t xcr0 = xgetbv0();
    if (!all((uint32_t)xcr0, XCR0_AVX)) return CPU_ISA_SCALAR;
    *why = "no cpuid leaf 7";
    if (__get_cpuid_max(0, 0) < 7) return CPU_ISA_SCALAR;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned ebx7 = b, ecx7 = c, edx7 = d, max_sub7 = a;
    unsigned eax7_1 = 0;
    if (max_sub7 >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        eax7_1 = a;
    }
    *why = "no AVX2, FMA or F16C";
    if (!all(ecx1, LEAF1_ECX_FMA | LEAF1_ECX_F16C) || !all(ebx7, LEAF7_EBX_AVX2))
        return CPU_ISA_SCALAR;
    const uint32_t avx512 =
        LEAF7_EBX_AVX512F | LEAF7_EBX_AVX512DQ | LEAF7_EBX_AVX512BW | LEAF7_EBX_AVX512VL;
    *why = "no AVX-512 F/BW/VL/DQ, or the OS does not save the ZMM and opmask registers";
    if (!all(ebx7, avx512) || !all((uint32_t)xcr0, XCR0_AVX512)) return CPU_ISA_AVX2;
    *why = "no AVX512_VNNI";
    if (!all(ecx7, LEAF7_ECX_AVX512VNNI)) return CPU_ISA_AVX512;
    *why = "no AVX512_BF16";
    if (!all(eax7_1, LEAF7_1_EAX_AVX512BF16)) return CPU_ISA_AVX512_VNNI;
    // Tiles need the cpuid bits, the OS saving tile state (XCR0), and its permission, asked
    // here, at detection, before any thread touches a tile.
    *why = "no AMX-TILE and AMX-BF16 in cpuid";
    if (!all(edx7, LEAF7_EDX_AMX_BF16 | LEAF7_EDX_AMX_TILE)) return CPU_ISA_AVX512_BF16;
    *why = "the OS does not save AMX tile state (XCR0 bits 17, 18)";
    if (!all((uint32_t)xcr0, XCR0_AMX)) return CPU_ISA_AVX512_BF16;
    *why = "Linux refused AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM; kernel 5.16 or later "
           "needed)";
    if (amx_permission() != 0) return CPU_ISA_AVX512_BF16;
    *why = "";
    return CPU_ISA_AMX_BF16;
}

cpu_isa cpu_isa_detect(void) {
    const char *why;
    return detect(&why);
}

const char *cpu_isa_detect_why(void) {
    const char *why;
    (void)detect(&why);
    return why;
}

static const cpu_kernel_set CPU_KERNEL_SETS[CPU_ISA_COUNT] = {
    {CPU_ISA_SCALAR, &cpu_matmul_scalar, &cpu_attention_scalar, &cpu_activation_scalar},
    {CPU_ISA_AVX2, &cpu_matmul_avx2, &cpu_attention_avx2, &cpu_activation_avx2},
    {CPU_ISA_AVX512, &cpu_matmul_avx512, &cpu_attention_avx512, &cpu_activation_avx512},
    {CPU_ISA_AVX512_VNNI, &cpu_matmul_avx512vnni, &cpu_attention_avx512, &cpu_activation_avx512},
    {CPU_ISA_AVX512_BF16, &cpu_matmul_avx512bf16, &cpu_attention_avx512, &cpu_activation_avx512},
    {CPU_ISA_AMX_BF16, &cpu_matmul_amxbf16, &cpu_attention_avx512, &cpu_activation_avx512},
};

const cpu_kernel_set *cpu_kernel_set_for(cpu_isa isa) {
    return isa >= 0 && isa < CPU_ISA_COUNT ? &CPU_KERNEL_SETS[isa] : NULL;
}
