/* The telemetry sampler's NVML path (metrics/telemetry.h): loads libnvidia-ml.so.1 by dlopen,
 * resolves device 0 and reads one sample's GPU fields. Without NVML it prints why and exits 77,
 * which CTest counts as a skip. */
#include <math.h>
#include <stdio.h>

#include "metrics/telemetry.h"

static int fail(const char *what, double v) {
    fprintf(stderr, "test_nvml_probe: %s = %g is not plausible\n", what, v);
    return 1;
}

int main(void) {
    telemetry_nvml n;
    if (telemetry_nvml_open(&n, NULL, 0) != 0) {
        printf("skipped: no NVML (%s)\n", n.status);
        return 77;
    }
    printf("nvml %s\n", n.status);
    telemetry_sample s;
    telemetry_nvml_read(&n, &s);
    printf("sm_util %g%% mem_util %g%% mem_used %.0f B power %g W sm %g MHz mem %g MHz\n",
           s.gpu_sm_util, s.gpu_mem_util, s.gpu_mem_used_bytes, s.gpu_power_w, s.gpu_sm_clock_mhz,
           s.gpu_mem_clock_mhz);
    int bad = 0;
    /* every field an H100/H200-class device reports; a NaN means an entry point failed */
    if (!(s.gpu_sm_util >= 0 && s.gpu_sm_util <= 100)) bad |= fail("gpu_sm_util", s.gpu_sm_util);
    if (!(s.gpu_mem_util >= 0 && s.gpu_mem_util <= 100))
        bad |= fail("gpu_mem_util", s.gpu_mem_util);
    if (!(s.gpu_mem_used_bytes > 0)) bad |= fail("gpu_mem_used_bytes", s.gpu_mem_used_bytes);
    if (!(s.gpu_power_w > 0 && s.gpu_power_w < 5000)) bad |= fail("gpu_power_w", s.gpu_power_w);
    if (!(s.gpu_sm_clock_mhz > 0)) bad |= fail("gpu_sm_clock_mhz", s.gpu_sm_clock_mhz);
    if (!(s.gpu_mem_clock_mhz > 0)) bad |= fail("gpu_mem_clock_mhz", s.gpu_mem_clock_mhz);
    telemetry_nvml_close(&n);
    return bad;
}
