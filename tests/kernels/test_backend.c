/* The backend selection table (kernels/backend.c): backends start by name, an unknown name is
 * a user error that lists the known ones, backend_free is safe to repeat, the cpu backend has
 * no devices and none of the optional entries, and "cuda" starts exactly when a device does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/backend.h"
#include "kernels/cpu/backend_cpu.h"
#include "kernels/cpu/cpu_isa.h"
#include "base/check.h"
#include "job/job.h"

/* Which of kernels/cuda/ and kernels/cuda_none.c this build selected (CMake defines
 * TRIPAR_HAVE_CUDA for the former). */
#ifdef TRIPAR_HAVE_CUDA
enum { BUILT_WITH_CUDA = 1 };
#else
enum { BUILT_WITH_CUDA = 0 };
#endif

static const backend_options opt = {.threads = 1, .device = 0, .max_marks = 4};

static void expect_message(const char *part) {
    if (!strstr(error_message(), part))
        fail_msg("error message \"%s\" lacks \"%s\"", error_message(), part);
}

/* Each optional entry of ops is set (present) or NULL (!present): a backend either has a
 * capability or not, so a missing one names the entry. */
static void expect_optional_entries(const backend_ops *ops, int present) {
    const struct {
        const char *name;
        int set;
    } entries[] = {
        {"stream", ops->stream != NULL},
        {"graph_begin", ops->graph_begin != NULL},
        {"graph_end_and_launch", ops->graph_end_and_launch != NULL},
        {"graph_launch", ops->graph_launch != NULL},
        {"graph_destroy", ops->graph_destroy != NULL},
        {"host_alloc", ops->host_alloc != NULL},
        {"host_free", ops->host_free != NULL},
        {"memory_info", ops->memory_info != NULL},
        {"range_start", ops->range_start != NULL},
        {"range_end", ops->range_end != NULL},
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (entries[i].set != present)
            fail_msg("%s: optional entry %s is %s", ops->name, entries[i].name,
                     entries[i].set ? "set" : "NULL");
}

static void test_cpu_by_name(void **state) {
    (void)state;
    backend be;
    assert_int_equal(backend_init(&be, "cpu", &opt), 0);
    assert_non_null(be.ops);
    assert_non_null(be.ctx);
    assert_string_equal(be.ops->name, "cpu");
    assert_non_null(be.ops->free);
    expect_optional_entries(be.ops, 0); // capabilities only a device backend has
    // it works: memory round trip through the table's backend
    float x[3] = {1, 2, 3}, y[3] = {0};
    float *d = be.ops->alloc(be.ctx, sizeof x);
    be.ops->copy_to_device(be.ctx, d, x, sizeof x);
    be.ops->copy_to_host(be.ctx, y, d, sizeof y);
    assert_memory_equal(x, y, sizeof x);
    be.ops->release(be.ctx, d);
    backend_free(&be);
    assert_null(be.ops);
    assert_null(be.ctx);
}

/* backend.cpu_isa's values are "auto" and the backend's levels, in the same order; each level
 * up to the detected one starts and reports itself, one above it is refused naming the best. */
static void test_cpu_isa_levels(void **state) {
    (void)state;
    const char *const *job_names = job_cpu_isa_names();
    assert_string_equal(job_names[0], "auto");
    for (int i = 0; i < CPU_ISA_COUNT; i++) {
        assert_string_equal(job_names[i + 1], cpu_isa_name((cpu_isa)i));
        assert_int_equal(cpu_isa_from_name(job_names[i + 1]), i);
    }
    assert_null(job_names[CPU_ISA_COUNT + 1]);
    const cpu_isa best = cpu_isa_detect();
    for (int i = 0; i < CPU_ISA_COUNT; i++) {
        backend be;
        backend_options opt = {.threads = 1, .cpu_isa = cpu_isa_name((cpu_isa)i)};
        const int rc = backend_init(&be, "cpu", &opt);
        if (i <= (int)best) {
            assert_int_equal(rc, 0);
            assert_int_equal(backend_cpu_isa(&be), i);
            assert_string_equal(be.ops->kernel_path(be.ctx), cpu_isa_name((cpu_isa)i));
            assert_non_null(cpu_kernel_set_for((cpu_isa)i));
            backend_free(&be);
        } else {
            assert_int_not_equal(rc, 0);
            assert_non_null(strstr(error_message(), "this CPU supports up to"));
            assert_non_null(strstr(error_message(), cpu_isa_name(best)));
            assert_non_null(strstr(error_message(), cpu_isa_detect_why())); // what is missing
        }
    }
    // The reason is empty exactly when nothing is missing.
    assert_int_equal(cpu_isa_detect_why()[0] == '\0', best == CPU_ISA_COUNT - 1);
    backend be;
    backend_options automatic = {.threads = 1, .cpu_isa = "auto"};
    assert_int_equal(backend_init(&be, "cpu", &automatic), 0);
    assert_int_equal(backend_cpu_isa(&be), best);
    backend_free(&be);
}

static void test_unknown_name(void **state) {
    (void)state;
    backend be;
    memset(&be, 0xab, sizeof be); // garbage that the failed init must clear
    assert_int_not_equal(backend_init(&be, "tpu", &opt), 0);
    expect_message("'tpu'");
    expect_message("cpu");
    expect_message("cuda");
    assert_null(be.ops);
    assert_null(be.ctx);
    backend_free(&be); // after a failed init
    assert_int_not_equal(backend_init(&be, NULL, &opt), 0);
    expect_message("known: cpu, cuda");
}

static void test_free_idempotent(void **state) {
    (void)state;
    backend_free(NULL);
    backend be;
    assert_int_equal(backend_init(&be, "cpu", &opt), 0);
    backend_free(&be);
    backend_free(&be);
    assert_null(be.ops);
    // a backend made by its own constructor frees the same way
    assert_int_equal(backend_cpu_init(&be, NULL), 0);
    backend_free(&be);
    assert_null(be.ctx);
}

static void test_device_queries(void **state) {
    (void)state;
    char bus[32] = "unset";
    assert_int_equal(backend_device_count("cpu"), 0);
    backend_pci_bus_id("cpu", 0, bus, sizeof bus);
    assert_string_equal(bus, "");
    assert_int_equal(backend_device_count("tpu"), 0);
    strcpy(bus, "unset");
    backend_pci_bus_id("tpu", 0, bus, sizeof bus);
    assert_string_equal(bus, "");
    assert_true(backend_device_count("cuda") >= 0);
    if (!BUILT_WITH_CUDA) assert_int_equal(backend_device_count("cuda"), 0);
    /* whether a rank picks a device comes from the table, present or not */
    assert_int_equal(backend_drives_devices("cpu"), 0);
    assert_int_equal(backend_drives_devices("cuda"), 1);
    assert_int_equal(backend_drives_devices("tpu"), 0);
}

/* "cuda" starts exactly when a device is visible; otherwise the message says why. */
static void test_cuda_by_name(void **state) {
    (void)state;
    backend be;
    int rc = backend_init(&be, "cuda", &opt);
    if (!BUILT_WITH_CUDA) {
        assert_int_not_equal(rc, 0);
        expect_message("built without CUDA");
        expect_message("use backend: cpu");
    } else if (backend_device_count("cuda") == 0) {
        assert_int_not_equal(rc, 0);
        expect_message("no CUDA device");
    } else {
        if (rc != 0) fail_msg("%s", error_message());
        assert_string_equal(be.ops->name, "cuda");
        expect_optional_entries(be.ops, 1);
    }
    backend_free(&be);
    assert_null(be.ops);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_by_name),     cmocka_unit_test(test_unknown_name),
        cmocka_unit_test(test_free_idempotent), cmocka_unit_test(test_device_queries),
        cmocka_unit_test(test_cuda_by_name),    cmocka_unit_test(test_cpu_isa_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
