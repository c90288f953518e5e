/* path_check_input, path_check_output and path_same_file on real files, links, a directory,
 * a FIFO and a device node, in a scratch directory of the test's own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/path.h"

static char scratch[] = "/tmp/tripar-path-XXXXXX";

static void in_scratch(char *out, size_t size, const char *name) {
    snprintf(out, size, "%s/%s", scratch, name);
}

static void touch(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("x\n", f);
    fclose(f);
}

static void test_inputs(void **state) {
    (void)state;
    char why[PATH_WHY_MAX], file[512], fifo[512];
    in_scratch(file, sizeof file, "in.yaml");
    in_scratch(fifo, sizeof fifo, "pipe");
    touch(file);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(path_check_input(file, why, sizeof why), 0);
    assert_int_equal(path_check_input(scratch, why, sizeof why), -1);
    assert_non_null(strstr(why, "directory"));
    assert_int_equal(path_check_input(fifo, why, sizeof why), -1);
    assert_non_null(strstr(why, "FIFO"));
    assert_int_equal(path_check_input("/dev/null", why, sizeof why), -1);
    assert_non_null(strstr(why, "character device"));
    in_scratch(file, sizeof file, "missing");
    assert_int_equal(path_check_input(file, why, sizeof why), -1);
    assert_string_equal(why, "does not exist");
    assert_int_equal(path_check_input("", why, sizeof why), -1);
}

static void test_outputs(void **state) {
    (void)state;
    char why[PATH_WHY_MAX], path[512];
    in_scratch(path, sizeof path, "new.h5");
    assert_int_equal(path_check_output(path, why, sizeof why), 0);
    touch(path);
    assert_int_equal(path_check_output(path, why, sizeof why), 0); /* replacing a file is fine */
    assert_int_equal(path_check_output("", why, sizeof why), -1);
    assert_int_equal(path_check_output(scratch, why, sizeof why), -1);
    assert_non_null(strstr(why, "directory"));
    in_scratch(path, sizeof path, "sub/");
    assert_int_equal(path_check_output(path, why, sizeof why), -1);
    assert_int_equal(path_check_output("/dev/full", why, sizeof why), -1);
    assert_non_null(strstr(why, "character device"));
    in_scratch(path, sizeof path, "no-such-dir/x.h5");
    assert_int_equal(path_check_output(path, why, sizeof why), -1);
    assert_non_null(strstr(why, "does not exist"));
    assert_int_equal(path_check_output("relative-name.h5", why, sizeof why), 0);
}

static void test_same_file(void **state) {
    (void)state;
    char a[512], b[512], link[512], dotted[600];
    in_scratch(a, sizeof a, "a");
    in_scratch(b, sizeof b, "b");
    in_scratch(link, sizeof link, "a-link");
    touch(a);
    touch(b);
    assert_int_equal(symlink(a, link), 0);
    snprintf(dotted, sizeof dotted, "%s/./a", scratch);
    assert_true(path_same_file(a, link));
    assert_true(path_same_file(a, dotted));
    assert_false(path_same_file(a, b));
    assert_false(path_same_file(a, ""));
    const char *inputs[] = {NULL, b, "", link};
    int which = -1;
    assert_true(path_is_any_of(dotted, inputs, 4, &which));
    assert_int_equal(which, 3);
    assert_false(path_is_any_of(b, inputs, 1, &which));
}

/* Two outputs compared before either is written: by name in the same directory (by inode). */
static void test_same_target(void **state) {
    (void)state;
    char a[512], a_dotted[600], b[512], sub[512], sub_a[600], link_dir[512], via_link[600];
    in_scratch(a, sizeof a, "out.h5");
    in_scratch(b, sizeof b, "other.h5");
    in_scratch(sub, sizeof sub, "sub");
    in_scratch(link_dir, sizeof link_dir, "sub-link");
    snprintf(a_dotted, sizeof a_dotted, "%s/./out.h5", scratch);
    snprintf(sub_a, sizeof sub_a, "%s/out.h5", sub);
    snprintf(via_link, sizeof via_link, "%s/out.h5", link_dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(symlink(sub, link_dir), 0);
    assert_true(path_same_target(a, a_dotted)); /* neither exists yet */
    assert_true(path_same_target(sub_a, via_link));
    assert_false(path_same_target(a, b));
    assert_false(path_same_target(a, sub_a));
    assert_false(path_same_target(a, ""));
    touch(a);
    assert_true(path_same_target(a, a_dotted)); /* both exist: by inode */
    assert_false(path_same_target(a, sub_a));   /* only one exists */
}

int main(void) {
    if (mkdtemp(scratch) == NULL) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inputs),
        cmocka_unit_test(test_outputs),
        cmocka_unit_test(test_same_file),
        cmocka_unit_test(test_same_target),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cleanup[600];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", scratch);
    if (system(cleanup) != 0) return 1;
    return failed;
}
