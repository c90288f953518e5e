/* The memory a process may still allocate (memlimit.h): /proc/meminfo, /proc/self/cgroup,
 * /proc/self/mountinfo and the cgroup's memory files. Plain text parsers over a file's text
 * (libproc2 reads only the live /proc and knows no cgroups, so it could be neither tested on
 * fixtures nor used for the limit that matters in a container). */
#include "base/memlimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/path.h"

/* v1 writes "unlimited" as LONG_MAX rounded down to a page; no machine has 2^60 bytes. */
#define MEMLIMIT_HUGE (1ull << 60)

/* Advances past the current line; NULL at the end of the text. */
static const char *next_line(const char *p) {
    const char *nl = strchr(p, '\n');
    return nl ? nl + 1 : NULL;
}

/* A line's leading "key" followed by sep (':' or ' '), then the number after blanks. */
static int line_number(const char *line, const char *key, char sep, unsigned long long *value) {
    size_t n = strlen(key);
    if (strncmp(line, key, n) || line[n] != sep) return -1;
    const char *p = line + n + 1;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p < '0' || *p > '9') return -1;
    char *end;
    *value = strtoull(p, &end, 10);
    return 0;
}

int memlimit_parse_meminfo(const char *text, const char *key, unsigned long long *bytes) {
    for (const char *p = text; p; p = next_line(p)) {
        unsigned long long kib;
        if (line_number(p, key, ':', &kib) != 0) continue;
        *bytes = kib * 1024ull; /* "kB" in /proc/meminfo is KiB (the kernel shifts by 10) */
        return 0;
    }
    return -1;
}

int memlimit_parse_stat(const char *text, const char *key, unsigned long long *value) {
    for (const char *p = text; p; p = next_line(p))
        if (line_number(p, key, ' ', value) == 0) return 0;
    return -1;
}

int memlimit_parse_value(const char *text, unsigned long long *value) {
    if (!strncmp(text, "max", 3)) {
        *value = MEMLIMIT_NONE;
        return 0;
    }
    if (*text < '0' || *text > '9') return -1;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0' && *end != '\n') return -1;
    *value = v >= MEMLIMIT_HUGE ? MEMLIMIT_NONE : v;
    return 0;
}

/* Copies the line at p (without its newline) into out; 0, or -1 when it does not fit. */
static int copy_line(const char *p, char *out, size_t len) {
    size_t n = strcspn(p, "\n");
    if (n >= len) return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

/* Whether the comma-separated list holds word. */
static int list_has(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

int memlimit_parse_proc_cgroup(const char *text, int version, char *path, size_t len) {
    for (const char *p = text; p; p = next_line(p)) {
        char line[1024];
        if (copy_line(p, line, sizeof line) != 0) continue;
        /* "hierarchy-ID:controller-list:cgroup-path"; the path may itself hold ':' */
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = '\0';
        const char *controllers = c1 + 1, *cg = c2 + 1;
        int match =
            version == 2 ? !strcmp(line, "0") && !*controllers : list_has(controllers, "memory");
        if (!match || strlen(cg) >= len) continue;
        snprintf(path, len, "%s", cg);
        return 0;
    }
    return -1;
}

/* mountinfo writes ' ', '\t', '\n' and '\\' as octal escapes ("\040"); undone in place. */
static void unescape_octal(char *s) {
    char *w = s;
    for (const char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

int memlimit_parse_mountinfo(const char *text, int version, char *mount_point, size_t mp_len,
                             char *root, size_t root_len) {
    for (const char *p = text; p; p = next_line(p)) {
        char line[4096];
        if (copy_line(p, line, sizeof line) != 0) continue;
        /* "ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER" */
        char *fields[6], *save = NULL, *tok = strtok_r(line, " ", &save);
        int n = 0;
        for (; tok && n < 6; tok = strtok_r(NULL, " ", &save))
            fields[n++] = tok;
        if (n < 6) continue;
        while (tok && strcmp(tok, "-"))
            tok = strtok_r(NULL, " ", &save);
        char *fstype = tok ? strtok_r(NULL, " ", &save) : NULL;
        char *source = fstype ? strtok_r(NULL, " ", &save) : NULL;
        char *super = source ? strtok_r(NULL, " ", &save) : NULL;
        if (!super) continue;
        int match = version == 2 ? !strcmp(fstype, "cgroup2")
                                 : !strcmp(fstype, "cgroup") && list_has(super, "memory");
        if (!match) continue;
        unescape_octal(fields[3]);
        unescape_octal(fields[4]);
        if (strlen(fields[4]) >= mp_len || strlen(fields[3]) >= root_len) continue;
        snprintf(mount_point, mp_len, "%s", fields[4]);
        snprintf(root, root_len, "%s", fields[3]);
        return 0;
    }
    return -1;
}

/* A file's text, or NULL when it is missing or unreadable (error_message is left as it was:
 * an absent file is the ordinary case, not an error). */
static char *read_quiet(const char *path) {
    char why[PATH_WHY_MAX];
    if (path_check_input(path, why, sizeof why) != 0) return NULL;
    return path_read_file(path, NULL);
}

static int read_value(const char *dir, const char *name, unsigned long long *value) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = read_quiet(path);
    int rc = text ? memlimit_parse_value(text, value) : -1;
    free(text);
    return rc;
}

static int read_stat(const char *dir, const char *name, const char *key,
                     unsigned long long *value) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = read_quiet(path);
    int rc = text ? memlimit_parse_stat(text, key, value) : -1;
    free(text);
    return rc;
}

/* The files of one cgroup version: limit, usage, and the memory.stat key of inactive file
 * pages, which the kernel reclaims before it OOM-kills (so they count as room, as Kubernetes'
 * working set leaves them out). */
typedef struct {
    const char *limit, *usage, *inactive_key;
} cgroup_files;
static const cgroup_files CGROUP_V1 = {"memory.limit_in_bytes", "memory.usage_in_bytes",
                                       "total_inactive_file"};
static const cgroup_files CGROUP_V2 = {"memory.max", "memory.current", "inactive_file"};

/* One cgroup directory's room, when it has a limit: limit - usage + inactive. */
static void level_consider(memlimit *out, const char *dir, int version) {
    const cgroup_files *f = version == 2 ? &CGROUP_V2 : &CGROUP_V1;
    unsigned long long limit, usage = 0, inactive = 0;
    if (read_value(dir, f->limit, &limit) != 0 || limit == MEMLIMIT_NONE) return;
    if (read_value(dir, f->usage, &usage) != 0) usage = 0;
    if (read_stat(dir, "memory.stat", f->inactive_key, &inactive) != 0) inactive = 0;
    if (inactive > usage) inactive = usage;
    unsigned long long used = usage - inactive;
    unsigned long long room = used < limit ? limit - used : 0;
    if (out->cgroup_version && room >= out->cgroup_room) return;
    out->cgroup_room = room;
    out->cgroup_limit = limit, out->cgroup_usage = usage, out->cgroup_inactive = inactive;
    out->cgroup_version = version;
    snprintf(out->cgroup_dir, sizeof out->cgroup_dir, "%s", dir);
}

/* Every level from the process's cgroup up to the mount, for one version. */
static void cgroup_walk(memlimit *out, const char *proc_dir, const char *sys_root, int version) {
    char path[1024], mp[1024], root[1024], file[1100];
    snprintf(file, sizeof file, "%s/self/cgroup", proc_dir);
    char *cg = read_quiet(file);
    int ok = cg && memlimit_parse_proc_cgroup(cg, version, path, sizeof path) == 0;
    free(cg);
    if (!ok) return;
    snprintf(file, sizeof file, "%s/self/mountinfo", proc_dir);
    char *mi = read_quiet(file);
    ok = mi && memlimit_parse_mountinfo(mi, version, mp, sizeof mp, root, sizeof root) == 0;
    free(mi);
    if (!ok) return;
    /* the path below the mount: the cgroup path less the subtree the mount shows at its root */
    const char *rel = path;
    size_t rl = strlen(root);
    if (strcmp(root, "/") && !strncmp(path, root, rl) && (path[rl] == '/' || !path[rl]))
        rel = path + rl;
    char dir[2300];
    snprintf(dir, sizeof dir, "%s%s%s", sys_root, mp, rel);
    size_t top = strlen(sys_root) + strlen(mp); /* the mount itself: the walk's last level */
    for (;;) {
        size_t n = strlen(dir);
        while (n > top && dir[n - 1] == '/')
            dir[--n] = '\0';
        level_consider(out, dir, version);
        char *slash = strrchr(dir, '/');
        if (n <= top || !slash || (size_t)(slash - dir) < top) break;
        *slash = '\0';
    }
}

void memlimit_read_at(memlimit *out, const char *proc_dir, const char *sys_root) {
    memset(out, 0, sizeof *out);
    out->mem_available = out->cgroup_room = MEMLIMIT_NONE;
    char file[1100];
    snprintf(file, sizeof file, "%s/meminfo", proc_dir);
    char *text = read_quiet(file);
    if (!text || memlimit_parse_meminfo(text, "MemAvailable", &out->mem_available) != 0)
        out->mem_available = MEMLIMIT_NONE;
    free(text);
    cgroup_walk(out, proc_dir, sys_root, 2);
    cgroup_walk(out, proc_dir, sys_root, 1);
}

void memlimit_read(memlimit *out) { memlimit_read_at(out, "/proc", ""); }

unsigned long long memlimit_have(const memlimit *m, const char **which) {
    int cgroup = m->cgroup_version && m->cgroup_room < m->mem_available;
    if (which) *which = cgroup ? "cgroup" : "MemAvailable";
    return cgroup ? m->cgroup_room : m->mem_available;
}
