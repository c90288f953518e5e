/* The memory-limit readers (base/memlimit.h) on fixture files in tests/base/memlimit/: trees of
 * /proc and /sys/fs/cgroup as a cgroup v2 host, a v1 hybrid host (this project's test machine's
 * layout), a container whose mount shows a cgroup subtree, and a host with no cgroup; and the
 * text parsers on the edge cases of each file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/memlimit.h"

#define MiB (1024ull * 1024ull)

static void read_tree(memlimit *m, const char *tree) {
    char proc[512], root[512];
    snprintf(proc, sizeof proc, "%s/%s/proc", MEMLIMIT_FIXTURES, tree);
    snprintf(root, sizeof root, "%s/%s", MEMLIMIT_FIXTURES, tree);
    memlimit_read_at(m, proc, root);
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

/* A v2 job cgroup binds: limit 1 GiB, 300 MiB in use of which 50 MiB inactive page cache; its
 * step below has no limit, nor has the slice above. */
static void test_tree_v2(void **state) {
    (void)state;
    memlimit m;
    read_tree(&m, "v2");
    assert_int_equal(m.cgroup_version, 2);
    assert_true(m.mem_available == 8ull * 1024 * MiB);
    assert_true(m.cgroup_limit == 1024 * MiB);
    assert_true(m.cgroup_usage == 300 * MiB);
    assert_true(m.cgroup_inactive == 50 * MiB);
    assert_true(m.cgroup_room == (1024 - 300 + 50) * MiB);
    assert_true(ends_with(m.cgroup_dir, "/v2/sys/fs/cgroup/system.slice/job42"));
    const char *which;
    assert_true(memlimit_have(&m, &which) == 774 * MiB);
    assert_string_equal(which, "cgroup");
}

/* v1 hybrid: the own cgroup is unlimited (LONG_MAX rounded to a page), its parent allows
 * 512 MiB with 100 MiB used; MemAvailable (256 MiB) is smaller and is what the run has. */
static void test_tree_v1_hybrid(void **state) {
    (void)state;
    memlimit m;
    read_tree(&m, "v1");
    assert_int_equal(m.cgroup_version, 1);
    assert_true(m.cgroup_room == 412 * MiB);
    assert_true(ends_with(m.cgroup_dir, "/v1/sys/fs/cgroup/memory/process_api"));
    const char *which;
    assert_true(memlimit_have(&m, &which) == 256 * MiB);
    assert_string_equal(which, "MemAvailable");
}

/* A container without a cgroup namespace: /proc/self/cgroup says /docker/c0ffee, and the mount
 * at /sys/fs/cgroup shows that subtree at its root, so the limit is the mount's own files. */
static void test_tree_container(void **state) {
    (void)state;
    memlimit m;
    read_tree(&m, "container");
    assert_int_equal(m.cgroup_version, 2);
    assert_true(m.cgroup_room == 1024 * MiB);
    assert_true(ends_with(m.cgroup_dir, "/container/sys/fs/cgroup"));
}

static void test_tree_none(void **state) {
    (void)state;
    memlimit m;
    read_tree(&m, "none");
    assert_int_equal(m.cgroup_version, 0);
    assert_true(m.cgroup_room == MEMLIMIT_NONE);
    assert_true(m.mem_available == 512 * 1024);
    memlimit_read_at(&m, "/nonexistent-proc", "/nonexistent"); /* nothing readable: no limit */
    assert_true(m.mem_available == MEMLIMIT_NONE && m.cgroup_room == MEMLIMIT_NONE);
}

static void test_parse_meminfo(void **state) {
    (void)state;
    unsigned long long v = 0;
    const char *text = "MemTotal:       24683772 kB\nMemFree: 15 kB\nMemAvailable:   23481964 kB\n";
    assert_int_equal(memlimit_parse_meminfo(text, "MemAvailable", &v), 0);
    assert_true(v == 23481964ull * 1024);
    assert_int_equal(memlimit_parse_meminfo(text, "MemFree", &v), 0);
    assert_true(v == 15 * 1024);
    /* a key that is a prefix of another is not matched by it */
    assert_int_equal(memlimit_parse_meminfo("MemAvailableX: 5 kB\n", "MemAvailable", &v), -1);
    assert_int_equal(memlimit_parse_meminfo("MemAvailable: n/a\n", "MemAvailable", &v), -1);
    assert_int_equal(memlimit_parse_meminfo("", "MemAvailable", &v), -1);
}

static void test_parse_values(void **state) {
    (void)state;
    unsigned long long v = 0;
    assert_int_equal(memlimit_parse_value("max\n", &v), 0);
    assert_true(v == MEMLIMIT_NONE);
    assert_int_equal(memlimit_parse_value("9223372036854771712\n", &v), 0);
    assert_true(v == MEMLIMIT_NONE);
    assert_int_equal(memlimit_parse_value("67108864\n", &v), 0);
    assert_true(v == 64 * MiB);
    assert_int_equal(memlimit_parse_value("64M\n", &v), -1);
    assert_int_equal(memlimit_parse_value("", &v), -1);
    const char *stat = "anon 1\nfile 2\nactive_file 3\ninactive_file 4\ntotal_inactive_file 5\n";
    assert_int_equal(memlimit_parse_stat(stat, "inactive_file", &v), 0);
    assert_true(v == 4);
    assert_int_equal(memlimit_parse_stat(stat, "total_inactive_file", &v), 0);
    assert_true(v == 5);
    assert_int_equal(memlimit_parse_stat(stat, "shmem", &v), -1);
}

static void test_parse_proc_cgroup(void **state) {
    (void)state;
    char path[256];
    const char *hybrid = "9:name=systemd:/\n4:cpu,memory:/a/b\n0::/unified/x\n";
    assert_int_equal(memlimit_parse_proc_cgroup(hybrid, 1, path, sizeof path), 0);
    assert_string_equal(path, "/a/b");
    assert_int_equal(memlimit_parse_proc_cgroup(hybrid, 2, path, sizeof path), 0);
    assert_string_equal(path, "/unified/x");
    /* "memorysomething" is not the memory controller; a path may hold ':' */
    assert_int_equal(memlimit_parse_proc_cgroup("3:memoryx:/a\n", 1, path, sizeof path), -1);
    assert_int_equal(memlimit_parse_proc_cgroup("0::/odd:name\n", 2, path, sizeof path), 0);
    assert_string_equal(path, "/odd:name");
    assert_int_equal(memlimit_parse_proc_cgroup("0::/x\n", 1, path, sizeof path), -1);
    assert_int_equal(memlimit_parse_proc_cgroup("0::/too-long\n", 2, path, 4), -1);
}

static void test_parse_mountinfo(void **state) {
    (void)state;
    char mp[256], root[256];
    const char *text =
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "41 31 0:38 /sub /mnt/with\\040space rw shared:1 master:2 - cgroup2 cgroup2 rw\n";
    assert_int_equal(memlimit_parse_mountinfo(text, 1, mp, sizeof mp, root, sizeof root), 0);
    assert_string_equal(mp, "/sys/fs/cgroup/memory");
    assert_string_equal(root, "/");
    /* optional fields before "-", and an escaped space in the mount point */
    assert_int_equal(memlimit_parse_mountinfo(text, 2, mp, sizeof mp, root, sizeof root), 0);
    assert_string_equal(mp, "/mnt/with space");
    assert_string_equal(root, "/sub");
    const char *no_memory = "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
    assert_int_equal(memlimit_parse_mountinfo(no_memory, 1, mp, sizeof mp, root, sizeof root), -1);
    assert_int_equal(memlimit_parse_mountinfo("garbage\n", 2, mp, sizeof mp, root, sizeof root),
                     -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_v2),           cmocka_unit_test(test_tree_v1_hybrid),
        cmocka_unit_test(test_tree_container),    cmocka_unit_test(test_tree_none),
        cmocka_unit_test(test_parse_meminfo),     cmocka_unit_test(test_parse_values),
        cmocka_unit_test(test_parse_proc_cgroup), cmocka_unit_test(test_parse_mountinfo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
