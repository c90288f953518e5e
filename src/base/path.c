/* See path.h. */
#include "base/path.h"

#include "base/check.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

int path_check_input(const char *path, char *why, size_t why_size) {
    struct stat st;
    if (path == NULL || path[0] == '\0') {
        snprintf(why, why_size, "is an empty path");
        return -1;
    }
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            snprintf(why, why_size, "does not exist");
        else
            snprintf(why, why_size, "cannot be read: %s", strerror(errno));
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(why, why_size, "is a directory, not a file");
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, why_size, "is %s, not a regular file", file_kind(st.st_mode));
        return -1;
    }
    return 0;
}

/* The directory part of path ("." when there is none), in dir. */
static void directory_of(const char *path, char *dir, size_t dir_size) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        snprintf(dir, dir_size, ".");
    } else if (slash == path) {
        snprintf(dir, dir_size, "/");
    } else {
        snprintf(dir, dir_size, "%.*s", (int)(slash - path), path);
    }
}

int path_check_output(const char *path, char *why, size_t why_size) {
    struct stat st;
    if (path == NULL || path[0] == '\0') {
        snprintf(why, why_size, "is an empty path; name a file to write");
        return -1;
    }
    size_t len = strlen(path);
    if (path[len - 1] == '/') {
        snprintf(why, why_size, "ends in '/'; name a file to write, not a directory");
        return -1;
    }
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(why, why_size, "is a directory; name a file to write");
            return -1;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(why, why_size, "exists and is %s; outputs may only replace regular files",
                     file_kind(st.st_mode));
            return -1;
        }
    } else if (errno != ENOENT) {
        snprintf(why, why_size, "cannot be checked: %s", strerror(errno));
        return -1;
    }
    char dir[PATH_MAX];
    directory_of(path, dir, sizeof dir);
    if (stat(dir, &st) != 0) {
        snprintf(why, why_size, "is in directory %s, which does not exist", dir);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, why_size, "is under %s, which is not a directory", dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(why, why_size, "is in directory %s, which is not writable", dir);
        return -1;
    }
    return 0;
}

int path_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (a == NULL || b == NULL || a[0] == '\0' || b[0] == '\0') return 0;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int path_same_target(const char *a, const char *b) {
    struct stat sa, sb;
    if (a == NULL || b == NULL || a[0] == '\0' || b[0] == '\0') return 0;
    int a_exists = stat(a, &sa) == 0, b_exists = stat(b, &sb) == 0;
    if (a_exists || b_exists)
        return a_exists && b_exists && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    /* neither exists yet: the same name in the same directory */
    const char *name_a = strrchr(a, '/'), *name_b = strrchr(b, '/');
    name_a = name_a ? name_a + 1 : a;
    name_b = name_b ? name_b + 1 : b;
    if (strcmp(name_a, name_b) != 0) return 0;
    char dir_a[PATH_MAX], dir_b[PATH_MAX];
    directory_of(a, dir_a, sizeof dir_a);
    directory_of(b, dir_b, sizeof dir_b);
    return path_same_file(dir_a, dir_b);
}

int path_is_any_of(const char *output, const char *const *inputs, int n_inputs, int *which) {
    for (int i = 0; i < n_inputs; i++) {
        if (path_same_file(output, inputs[i])) {
            if (which != NULL) *which = i;
            return 1;
        }
    }
    return 0;
}

char *path_read_file(const char *path, size_t *len) {
    char why[PATH_WHY_MAX];
    if (path_check_input(path, why, sizeof why) != 0) {
        error_set("%s %s", path, why);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        error_set("%s: cannot read it: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0, got;
    char *buf = xmalloc(cap + 1);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            char *grown = realloc(buf, cap + 1);
            CHECK(grown != NULL, "out of memory reading %s", path);
            buf = grown;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        error_set("%s: read error", path);
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len != NULL) *len = n;
    return buf;
}
