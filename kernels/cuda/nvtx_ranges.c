/* NVTX ranges for the phase timer (see nvtx_ranges.h). */
#include "kernels/cuda/nvtx_ranges.h"

#include <nvtx3/nvToolsExt.h>

/* Registered strings are what a profiler resolves cheapest: one handle per phase name, cached
 * by the name's address (the timer passes phase_name()'s static strings). Beyond the table's
 * size a name is passed as a plain string, which costs a copy in the profiler, nothing more. */
enum { NVTX_NAMES_MAX = 64 };
static struct {
    int started; /* the domain was asked for (NULL without a profiler) */
    nvtxDomainHandle_t domain;
    int n_names;
    const char *names[NVTX_NAMES_MAX];
    nvtxStringHandle_t handles[NVTX_NAMES_MAX];
} nvtx; /* the timer runs on one thread per rank, so no lock */

static nvtxStringHandle_t nvtx_name_handle(const char *name) {
    for (int i = 0; i < nvtx.n_names; i++)
        if (nvtx.names[i] == name) return nvtx.handles[i];
    if (nvtx.n_names == NVTX_NAMES_MAX) return NULL;
    nvtx.names[nvtx.n_names] = name;
    nvtx.handles[nvtx.n_names] = nvtxDomainRegisterStringA(nvtx.domain, name);
    return nvtx.handles[nvtx.n_names++];
}

uint64_t cuda_nvtx_range_start(void *ctx, const char *name, int payload) {
    (void)ctx;
    if (!nvtx.started) nvtx.domain = nvtxDomainCreateA("tripar"), nvtx.started = 1;
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    nvtxStringHandle_t handle = nvtx_name_handle(name);
    if (handle) {
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = handle;
    } else {
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = name;
    }
    a.payloadType = NVTX_PAYLOAD_TYPE_INT32;
    a.payload.iValue = payload;
    return nvtxDomainRangeStartEx(nvtx.domain, &a);
}

void cuda_nvtx_range_end(void *ctx, uint64_t id) {
    (void)ctx;
    nvtxDomainRangeEnd(nvtx.domain, id);
}
