/* Typed reads of one key of a job file: integers, floats, booleans, enums, strings and paths,
 * each checked for type and range with a message naming the key and where it was set; and the
 * check that a section holds only its allowed keys. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/check.h"
#include "job/job.h"
#include "job/job_internal.h"
#include "job/job_tree.h"

/* The value of section.key in map m, noting where it was set; NULL when absent. */
const jnode *job_field(job_loader *L, const jnode *m, const char *section, const char *key,
                       const jnode **key_node) {
    const jnode *k = NULL;
    const jnode *v = jnode_get(m, key, &k);
    if (v) {
        char full[128];
        snprintf(full, sizeof full, "%s.%s", section, key);
        job_key_note(L->j, full, k);
        if (key_node) *key_node = k;
    }
    return v;
}

/* Checks that every key of section m is allowed. A null section counts as empty. */
int job_section_check(const jnode *m, const jnode *m_key, const char *section,
                      const char *const *allowed) {
    char list[512];
    job_names_join(allowed, list, sizeof list);
    if (!m || m->type == JNODE_NULL) return STATUS_OK;
    if (m->type != JNODE_MAP) {
        char buf[128];
        return jnode_fail(m_key ? m_key : m, "%s must be a mapping of keys (%s), got %s", section,
                          list, jnode_describe(m, buf, sizeof buf));
    }
    for (int i = 0; i < m->n; i++) {
        int known = 0;
        for (int a = 0; allowed[a]; a++)
            known |= !strcmp(m->keys[i]->value, allowed[a]);
        if (known) continue;
        if (!strcmp(section, "job"))
            return jnode_fail(m->keys[i], "unknown section '%s'; allowed: %s", m->keys[i]->value,
                              list);
        if (strchr(section, '.'))
            return jnode_fail(m->keys[i], "unknown key '%s' in %s; allowed: %s", m->keys[i]->value,
                              section, list);
        return jnode_fail(m->keys[i], "unknown key '%s' in section '%s'; allowed: %s",
                          m->keys[i]->value, section, list);
    }
    return STATUS_OK;
}

/* 1 when a plain scalar is an integer written with a leading zero ("010", "-07"): YAML 1.1
 * readers (PyYAML, and so most tools that write job files) take it as octal, 8, while a
 * decimal reading gives 10. Neither guess is safe, so such a value is refused. */
static int job_leading_zero(const char *s) {
    if (*s == '-' || *s == '+') s++;
    if (s[0] != '0' || s[1] < '0' || s[1] > '9') return 0;
    while (*s >= '0' && *s <= '9')
        s++;
    return *s == '\0';
}

static int job_refuse_leading_zero(const jnode *v, const char *name) {
    return jnode_fail(v,
                      "%s: '%s' has a leading zero, which YAML 1.1 reads as octal; write the "
                      "number without it",
                      name, v->value);
}

int job_parse_long(const jnode *v, const char *name, long lo, long hi, long *out) {
    char buf[128];
    if (v->type != JNODE_SCALAR || v->quoted || (v->tag != JTAG_NONE && v->tag != JTAG_INT))
        return jnode_fail(v, "%s: expected an integer, got %s", name,
                          jnode_describe(v, buf, sizeof buf));
    if (job_leading_zero(v->value)) return job_refuse_leading_zero(v, name);
    errno = 0;
    char *end = NULL;
    long long x = strtoll(v->value, &end, 10);
    if (end == v->value || *end || (v->value[0] < '0' && v->value[0] != '-' && v->value[0] != '+'))
        return jnode_fail(v, "%s: expected an integer, got %s", name,
                          jnode_describe(v, buf, sizeof buf));
    if (errno == ERANGE || x < lo || x > hi)
        return jnode_fail(v, "%s = %s is out of range; allowed: %ld to %ld", name, v->value, lo,
                          hi);
    *out = (long)x;
    return STATUS_OK;
}

int job_get_int(job_loader *L, const jnode *m, const char *section, const char *key, long lo,
                long hi, int *out) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    char name[128];
    snprintf(name, sizeof name, "%s.%s", section, key);
    long x = 0;
    TRY(job_parse_long(v, name, lo, hi, &x));
    *out = (int)x;
    return STATUS_OK;
}

int job_get_u64(job_loader *L, const jnode *m, const char *section, const char *key,
                uint64_t *out) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    char buf[128];
    errno = 0;
    char *end = NULL;
    unsigned long long x = v->type == JNODE_SCALAR ? strtoull(v->value, &end, 10) : 0;
    if (v->type == JNODE_SCALAR && !v->quoted && job_leading_zero(v->value)) {
        char name[128];
        snprintf(name, sizeof name, "%s.%s", section, key);
        return job_refuse_leading_zero(v, name);
    }
    if (v->type != JNODE_SCALAR || v->quoted || (v->tag != JTAG_NONE && v->tag != JTAG_INT) ||
        end == v->value || *end || errno == ERANGE || v->value[0] < '0' || v->value[0] > '9')
        return jnode_fail(v, "%s.%s: expected an integer from 0 to 2^64-1, got %s", section, key,
                          jnode_describe(v, buf, sizeof buf));
    *out = (uint64_t)x;
    return STATUS_OK;
}

/* The largest value a float key takes: below FLT_MAX, so the value stays finite as a float. */
#define JOB_FLOAT_MAX 3.0e38

/* A float above lo (exclusive) and at most JOB_FLOAT_MAX; or exactly 0 when zero_off (the key's
 * "off"). The message states that whole range. */
int job_get_float(job_loader *L, const jnode *m, const char *section, const char *key, double lo,
                  int zero_off, float *out) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    char buf[128], name[128];
    snprintf(name, sizeof name, "%s.%s", section, key);
    errno = 0;
    char *end = NULL;
    double x = v->type == JNODE_SCALAR ? strtod(v->value, &end) : 0;
    if (v->type != JNODE_SCALAR || v->quoted || v->tag == JTAG_BOOL || end == v->value || *end ||
        !isfinite(x) || (v->value[0] < '0' && !strchr("+-.", v->value[0])) ||
        strpbrk(v->value, "xXpP")) /* strtod's hex floats are no YAML number */
        return jnode_fail(v, "%s: expected a number, got %s", name,
                          jnode_describe(v, buf, sizeof buf));
    if (job_leading_zero(v->value)) return job_refuse_leading_zero(v, name);
    if (!(x > lo || (zero_off && x == 0)) || x > JOB_FLOAT_MAX)
        return jnode_fail(v, "%s = %s is out of range; allowed: %s> %g and <= %g", name, v->value,
                          zero_off ? "0 (off), or " : "", lo, JOB_FLOAT_MAX);
    /* A positive value below float's range (temperature: 1e-300) would round to 0, which the
     * resolved job could then not be read back with; keep it the smallest positive float. */
    *out = x > 0 && x < FLT_MIN ? FLT_MIN : (float)x;
    return STATUS_OK;
}

int job_get_bool(job_loader *L, const jnode *m, const char *section, const char *key, int *out) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    static const char *const yes[] = {"true", "yes", "on", NULL}, *const no[] = {"false", "no",
                                                                                 "off", NULL};
    int plain =
        v->type == JNODE_SCALAR && !v->quoted && (v->tag == JTAG_NONE || v->tag == JTAG_BOOL);
    for (int i = 0; plain && yes[i]; i++) {
        if (!strcasecmp(v->value, yes[i])) return *out = 1, STATUS_OK;
        if (!strcasecmp(v->value, no[i])) return *out = 0, STATUS_OK;
    }
    char buf[128];
    return jnode_fail(v, "%s.%s: expected true or false, got %s", section, key,
                      jnode_describe(v, buf, sizeof buf));
}

int job_parse_enum(const jnode *v, const char *name, const char *const *names, int *out) {
    char list[256], buf[128];
    job_names_join(names, list, sizeof list);
    if (v->type == JNODE_SCALAR)
        for (int i = 0; names[i]; i++)
            if (!strcmp(v->value, names[i])) return *out = i, STATUS_OK;
    return jnode_fail(v, "%s: %s is not allowed; allowed: %s", name,
                      jnode_describe(v, buf, sizeof buf), list);
}

int job_get_enum(job_loader *L, const jnode *m, const char *section, const char *key,
                 const char *const *names, int *out) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    char name[128];
    snprintf(name, sizeof name, "%s.%s", section, key);
    return job_parse_enum(v, name, names, out);
}

int job_get_string(job_loader *L, const jnode *m, const char *section, const char *key, char *out,
                   size_t size) {
    const jnode *v = job_field(L, m, section, key, NULL);
    if (!v) return STATUS_OK;
    char buf[128];
    if (v->type != JNODE_SCALAR || !v->value[0])
        return jnode_fail(v, "%s.%s: expected a non-empty string, got %s", section, key,
                          jnode_describe(v, buf, sizeof buf));
    if (strlen(v->value) >= size)
        return jnode_fail(v, "%s.%s: longer than %zu characters", section, key, size - 1);
    memcpy(out, v->value, strlen(v->value) + 1);
    return STATUS_OK;
}

/* dir/given as an absolute path, dir being absolute, "." (the working directory cwd) or
 * relative to cwd. Returns STATUS_OK, or fails at v when it does not fit. */
static int job_path_join(char *out, const char *dir, const char *cwd, const char *given,
                         const jnode *v, const char *section, const char *key) {
    int len = dir[0] == '/'       ? snprintf(out, JOB_PATH_MAX, "%s/%s", dir, given)
              : !strcmp(dir, ".") ? snprintf(out, JOB_PATH_MAX, "%s/%s", cwd, given)
                                  : snprintf(out, JOB_PATH_MAX, "%s/%s/%s", cwd, dir, given);
    if (len >= JOB_PATH_MAX)
        return jnode_fail(v, "%s.%s: path longer than %d characters", section, key,
                          JOB_PATH_MAX - 1);
    return STATUS_OK;
}

/* A file path. A relative one written in the job file is looked up in the job file's directory
 * first and, when it is not there, in the working directory: a job kept beside its files finds
 * them from anywhere, and a job in jobs/ may name data/prompts/... for runs from the repository
 * root. One given with --set is relative to the working directory only, as on any command
 * line. Resolved to an absolute path, so a dumped job still names the same file wherever it is
 * reloaded. */
int job_get_path(job_loader *L, const jnode *m, const char *section, const char *key, char *out) {
    char given[JOB_PATH_MAX];
    given[0] = '\0';
    TRY(job_get_string(L, m, section, key, given, sizeof given));
    if (!given[0]) return STATUS_OK;
    const jnode *v = jnode_get(m, key, NULL);
    char cwd[JOB_PATH_MAX], fallback[JOB_PATH_MAX];
    fallback[0] = '\0';
    if (given[0] == '/' || !getcwd(cwd, sizeof cwd)) {
        snprintf(out, JOB_PATH_MAX, "%s", given);
    } else {
        const char *dir = v->line > 0 ? L->dir : ".";
        TRY(job_path_join(out, dir, cwd, given, v, section, key));
        if (strcmp(dir, ".") != 0 && access(out, F_OK) != 0) {
            TRY(job_path_join(fallback, ".", cwd, given, v, section, key));
            if (access(fallback, F_OK) == 0) memcpy(out, fallback, strlen(fallback) + 1);
        }
    }
    if (access(out, R_OK) != 0) {
        if (fallback[0] && strcmp(out, fallback) != 0)
            return jnode_fail(v, "%s.%s: cannot read '%s' (nor '%s' in the working directory): %s",
                              section, key, out, fallback, strerror(errno));
        return jnode_fail(v, "%s.%s: cannot read '%s': %s", section, key, out, strerror(errno));
    }
    return STATUS_OK;
}
