/* Where each key of a job was set (a line of the job file, or the --set that gave it), so that
 * messages made while loading and after it (job_validate_model, the runner) point at it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "job/job.h"
#include "job/job_internal.h"
#include "job/job_tree.h"

void job_key_note(job *j, const char *key, const jnode *key_node) {
    job_key_where *w = NULL;
    for (int i = 0; i < j->n_keys; i++)
        if (strcmp(j->keys[i].key, key) == 0) w = &j->keys[i];
    if (!w) {
        if (j->n_keys == JOB_MAX_KEYS || strlen(key) >= sizeof w->key) return;
        w = &j->keys[j->n_keys++];
        snprintf(w->key, sizeof w->key, "%s", key);
    }
    w->line = key_node->line;
    w->set[0] = '\0';
    if (key_node->line == 0) {
        size_t len = strlen(key_node->origin);
        if (len < sizeof w->set)
            memcpy(w->set, key_node->origin, len + 1);
        else
            snprintf(w->set, sizeof w->set, "%.*s...", (int)sizeof w->set - 4, key_node->origin);
    }
}

const job_key_where *job_key_find(const job *j, const char *key) {
    for (int i = 0; i < j->n_keys; i++)
        if (strcmp(j->keys[i].key, key) == 0) return &j->keys[i];
    return NULL;
}

int job_key_line(const job *j, const char *key) {
    const job_key_where *w = job_key_find(j, key);
    return w ? w->line : 0;
}

int job_key_given(const job *j, const char *key) { return job_key_find(j, key) != NULL; }

const char *job_key_origin(const job *j, const char *key, char *buf, size_t len) {
    const job_key_where *w = job_key_find(j, key);
    if (w && w->set[0])
        snprintf(buf, len, "%s", w->set);
    else if (w && w->line > 0)
        snprintf(buf, len, "%s:%d", j->source, w->line);
    else
        snprintf(buf, len, "%s", j->source[0] ? j->source : "job");
    return buf;
}

/* Reports at the first of the NULL-terminated keys that the command line set (--set, or the
 * --sweep point being checked), else at the first set in the file, else at the file. When
 * several keys make one check fail (the prompt length and new_tokens against ctx), the one
 * given on the command line is what changed from a job that worked: a sweep point is blamed,
 * not the file's line that the point's value meets. */
int job_fail_at(const job *j, const char *const *keys, const char *fmt, ...) {
    char message[1600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    const job_key_where *w = NULL;
    for (int i = 0; keys[i] && !w; i++) {
        const job_key_where *k = job_key_find(j, keys[i]);
        if (k && k->set[0]) w = k;
    }
    for (int i = 0; keys[i] && !w; i++)
        w = job_key_find(j, keys[i]);
    if (w && w->set[0])
        error_set("%s: %s", w->set, message);
    else if (w && w->line > 0)
        error_set("%s:%d: %s", j->source, w->line, message);
    else
        error_set("%s: %s", j->source[0] ? j->source : "job", message);
    return STATUS_BAD_INPUT;
}
