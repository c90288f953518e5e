/* Parameter sweeps (see sweep.h): parsing of --sweep KEY=v1,v2, the cross product and the
 * run file name of each point. */
#include "job/sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "job/job.h"

void sweep_init(sweep *s) { memset(s, 0, sizeof *s); }

void sweep_free(sweep *s) {
    for (int a = 0; a < s->n_axes; a++)
        for (int v = 0; v < s->axes[a].n; v++) free(s->axes[a].values[v]);
    memset(s, 0, sizeof *s);
}

static char *sweep_strndup(const char *p, size_t n) {
    while (n > 0 && (*p == ' ' || *p == '\t')) p++, n--; /* values are trimmed */
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    char *out = xmalloc(n + 1);
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

int sweep_add(sweep *s, const char *spec) {
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1]) {
        error_set("--sweep %s: expected KEY=VALUE1,VALUE2,... (e.g. "
                  "input.synthetic.length=128,512)", spec);
        return STATUS_BAD_INPUT;
    }
    if (s->n_axes == SWEEP_MAX_KEYS) {
        error_set("--sweep %s: at most %d swept keys", spec, SWEEP_MAX_KEYS);
        return STATUS_BAD_INPUT;
    }
    size_t key_len = (size_t)(eq - spec);
    sweep_axis *ax = &s->axes[s->n_axes];
    if (key_len >= sizeof ax->key) {
        error_set("--sweep %s: key longer than %zu characters", spec, sizeof ax->key - 1);
        return STATUS_BAD_INPUT;
    }
    memset(ax, 0, sizeof *ax);
    memcpy(ax->key, spec, key_len);
    for (int a = 0; a < s->n_axes; a++)
        if (!strcmp(s->axes[a].key, ax->key)) {
            error_set("--sweep: key %s is swept twice; list all its values in one --sweep",
                      ax->key);
            return STATUS_BAD_INPUT;
        }
    const char *p = eq + 1, *start = p;
    int depth = 0;
    for (;; p++) {
        if (*p == '[' || *p == '{') depth++;
        if ((*p == ']' || *p == '}') && depth > 0) depth--;
        if ((*p == ',' && depth == 0) || *p == '\0') {
            char *v = sweep_strndup(start, (size_t)(p - start));
            if (!v[0] || ax->n == SWEEP_MAX_VALUES ||
                strlen(ax->key) + strlen(v) + 2 > SWEEP_TEXT_MAX) {
                if (!v[0]) error_set("--sweep %s: empty value", spec);
                else if (ax->n == SWEEP_MAX_VALUES)
                    error_set("--sweep %s: at most %d values per key", spec, SWEEP_MAX_VALUES);
                else error_set("--sweep %s: value '%s' too long", spec, v);
                free(v);
                for (int i = 0; i < ax->n; i++) free(ax->values[i]);
                memset(ax, 0, sizeof *ax);
                return STATUS_BAD_INPUT;
            }
            ax->values[ax->n++] = v;
            if (*p == '\0') break;
            start = p + 1;
        }
    }
    s->n_axes++;
    if (sweep_points(s) > SWEEP_MAX_POINTS) {
        error_set("--sweep: %ld points in the cross product; at most %d", sweep_points(s),
                  SWEEP_MAX_POINTS);
        s->n_axes--;
        for (int i = 0; i < ax->n; i++) free(ax->values[i]);
        memset(ax, 0, sizeof *ax);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

long sweep_points(const sweep *s) {
    long n = 1;
    for (int a = 0; a < s->n_axes; a++) n *= s->axes[a].n;
    return n;
}

int sweep_value_index(const sweep *s, long p, int a) {
    for (int b = s->n_axes - 1; b > a; b--) p /= s->axes[b].n;
    return (int)(p % s->axes[a].n);
}

void sweep_override(const sweep *s, long p, int a, char *out, size_t len) {
    snprintf(out, len, "%s=%s", s->axes[a].key, s->axes[a].values[sweep_value_index(s, p, a)]);
}

/* What a point's file name shows of a value: for a path key, the file's stem (the last
 * component without its extension), so data/prompts/qa-512.txt names the point qa-512 rather
 * than the whole path; any other value as given. */
static void sweep_value_label(const char *key, const char *value, char *out, size_t len) {
    const char *base = strrchr(value, '/');
    base = base ? base + 1 : value;
    size_t n = strlen(base);
    const char *dot = strrchr(base, '.');
    if (dot && dot > base) n = (size_t)(dot - base); /* a leading dot is a name, not an extension */
    if (!job_key_is_path(key) || n == 0) base = value, n = strlen(value);
    snprintf(out, len, "%.*s", (int)n, base);
}

int sweep_point_path(const sweep *s, long p, const char *out, char *path, size_t len) {
    size_t stem = strlen(out);
    if (s->n_axes > 0 && stem >= 3 && !strcmp(out + stem - 3, ".h5")) stem -= 3;
    if (stem + 1 > len) return -1;
    memcpy(path, out, stem);
    size_t n = stem;
    for (int a = 0; a < s->n_axes; a++) {
        char label[SWEEP_TEXT_MAX], part[SWEEP_TEXT_MAX + 2];
        sweep_value_label(s->axes[a].key, s->axes[a].values[sweep_value_index(s, p, a)], label,
                          sizeof label);
        int w = snprintf(part, sizeof part, ".%s=%s", s->axes[a].key, label);
        /* the value must not make directories or shell trouble in a file name */
        for (int i = 1 + (int)strlen(s->axes[a].key) + 1; i < w; i++) {
            char c = part[i];
            int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '.' || c == '_' || c == '+' || c == '-';
            if (!ok) part[i] = '_';
        }
        if (n + (size_t)w + 1 > len) return -1;
        memcpy(path + n, part, (size_t)w);
        n += (size_t)w;
    }
    const char *tail = s->n_axes > 0 ? ".h5" : "";
    if (n + strlen(tail) + 1 > len) return -1;
    memcpy(path + n, tail, strlen(tail) + 1);
    return 0;
}

long sweep_path_clash(char *const *paths, long n, long *first) {
    for (long q = 1; q < n; q++)
        for (long p = 0; p < q; p++)
            if (!strcmp(paths[p], paths[q])) {
                *first = p;
                return q;
            }
    return -1;
}
