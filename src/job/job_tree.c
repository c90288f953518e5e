/* Reads a job file with libyaml into a jnode tree that keeps each node's origin, and grafts
 * --set overrides into it. Validation of keys and values lives in job.c. */
#include "job/job_tree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/check.h"

/* Aliases may expand a small file into a huge tree ("billion laughs") or a cycle: cap both. */
#define JTREE_MAX_NODES 1000000L
#define JTREE_MAX_DEPTH 32

int jnode_fail(const jnode *at, const char *fmt, ...) {
    char message[1600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (at && at->line > 0)
        error_set("%s:%d: %s", at->origin, at->line, message);
    else
        error_set("%s: %s", at ? at->origin : "job", message);
    return STATUS_BAD_INPUT;
}

const char *jnode_describe(const jnode *v, char *buf, int size) {
    if (!v || v->type == JNODE_NULL) return "nothing";
    if (v->type == JNODE_SEQ) return "a sequence";
    if (v->type == JNODE_MAP) return "a mapping";
    snprintf(buf, (size_t)size, "%s'%.60s%s'", v->quoted ? "the string " : "", v->value,
             strlen(v->value) > 60 ? "..." : "");
    return buf;
}

static jnode *jnode_new(jtree *t, jnode_type type, const char *origin, int line) {
    jnode *n = xcalloc(1, sizeof *n);
    n->type = type;
    n->origin = origin;
    n->line = line;
    n->next_alloc = t->all;
    t->all = n;
    t->n_nodes++;
    return n;
}

static void jnode_append(jnode *parent, jnode *key, jnode *value) {
    if (parent->n == parent->cap) {
        parent->cap = parent->cap ? 2 * parent->cap : 4;
        parent->items = realloc(parent->items, (size_t)parent->cap * sizeof *parent->items);
        CHECK(parent->items, "out of memory growing a job tree node");
        if (parent->type == JNODE_MAP) {
            parent->keys = realloc(parent->keys, (size_t)parent->cap * sizeof *parent->keys);
            CHECK(parent->keys, "out of memory growing a job tree node");
        }
    }
    if (parent->type == JNODE_MAP) parent->keys[parent->n] = key;
    parent->items[parent->n++] = value;
}

jnode *jnode_get(const jnode *m, const char *key, const jnode **key_node) {
    if (!m || m->type != JNODE_MAP) return NULL;
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->keys[i]->value, key) == 0) {
            if (key_node) *key_node = m->keys[i];
            return m->items[i];
        }
    return NULL;
}

static const char *jtree_origin_add(jtree *t, const char *text) {
    t->origins = realloc(t->origins, (size_t)(t->n_origins + 1) * sizeof *t->origins);
    CHECK(t->origins, "out of memory");
    t->origins[t->n_origins] = strdup(text);
    CHECK(t->origins[t->n_origins], "out of memory");
    return t->origins[t->n_origins++];
}

static int scalar_is_null(const yaml_node_t *yn) {
    if (yn->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    const char *v = (const char *)yn->data.scalar.value;
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

/* Copies the libyaml node yn (and its children) into t. lines: take line numbers from marks
 * (file) or leave 0 (--set values, whose marks point into the value string). */
static int jtree_convert(jtree *t, yaml_document_t *doc, yaml_node_t *yn, const char *origin,
                         int lines, int depth, jnode **out) {
    int line = lines ? (int)yn->start_mark.line + 1 : 0;
    jnode probe = {.origin = origin, .line = line};
    if (depth > JTREE_MAX_DEPTH)
        return jnode_fail(&probe, "nesting deeper than %d levels (a recursive alias?)",
                          JTREE_MAX_DEPTH);
    if (t->n_nodes > JTREE_MAX_NODES)
        return jnode_fail(&probe,
                          "more than %ld YAML nodes (aliases expanding too far?); "
                          "give long token lists with input.tokens_file",
                          JTREE_MAX_NODES);
    if (yn->type == YAML_SCALAR_NODE) {
        if (scalar_is_null(yn)) {
            *out = jnode_new(t, JNODE_NULL, origin, line);
            return STATUS_OK;
        }
        jnode *n = jnode_new(t, JNODE_SCALAR, origin, line);
        n->value = strdup((const char *)yn->data.scalar.value);
        CHECK(n->value, "out of memory");
        n->quoted = yn->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        *out = n;
        return STATUS_OK;
    }
    if (yn->type == YAML_SEQUENCE_NODE) {
        jnode *n = jnode_new(t, JNODE_SEQ, origin, line);
        *out = n;
        for (yaml_node_item_t *it = yn->data.sequence.items.start; it < yn->data.sequence.items.top;
             it++) {
            jnode *child = NULL;
            int rc = jtree_convert(t, doc, yaml_document_get_node(doc, *it), origin, lines,
                                   depth + 1, &child);
            if (rc) return rc;
            jnode_append(n, NULL, child);
        }
        return STATUS_OK;
    }
    if (yn->type == YAML_MAPPING_NODE) {
        jnode *n = jnode_new(t, JNODE_MAP, origin, line);
        *out = n;
        for (yaml_node_pair_t *p = yn->data.mapping.pairs.start; p < yn->data.mapping.pairs.top;
             p++) {
            jnode *key = NULL, *value = NULL;
            int rc = jtree_convert(t, doc, yaml_document_get_node(doc, p->key), origin, lines,
                                   depth + 1, &key);
            if (rc) return rc;
            if (key->type != JNODE_SCALAR)
                return jnode_fail(key, "a key must be a plain name, got %s",
                                  key->type == JNODE_NULL ? "an empty key" : "a collection");
            const jnode *first = NULL;
            if (jnode_get(n, key->value, &first)) {
                if (first->line > 0)
                    return jnode_fail(key, "duplicate key '%s' (first given on line %d)",
                                      key->value, first->line);
                return jnode_fail(key, "duplicate key '%s'", key->value);
            }
            rc = jtree_convert(t, doc, yaml_document_get_node(doc, p->value), origin, lines,
                               depth + 1, &value);
            if (rc) return rc;
            jnode_append(n, key, value);
        }
        return STATUS_OK;
    }
    return jnode_fail(&probe, "empty YAML node");
}

/* Parses one YAML document from an open parser into *out (NULL when the input is empty). */
static int jtree_parse(jtree *t, yaml_parser_t *parser, const char *origin, int lines,
                       jnode **out) {
    yaml_document_t doc;
    *out = NULL;
    if (!yaml_parser_load(parser, &doc)) {
        jnode at = {.origin = origin, .line = lines ? (int)parser->problem_mark.line + 1 : 0};
        char opened[64] = "";
        if (parser->context && lines && parser->context_mark.line != parser->problem_mark.line)
            snprintf(opened, sizeof opened, " that starts on line %d",
                     (int)parser->context_mark.line + 1);
        return jnode_fail(&at, "YAML syntax error: %s%s%s%s",
                          parser->problem ? parser->problem : "?", parser->context ? " " : "",
                          parser->context ? parser->context : "", opened);
    }
    int rc = STATUS_OK;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root) rc = jtree_convert(t, &doc, root, origin, lines, 0, out);
    yaml_document_delete(&doc);
    if (rc || !root) return rc;
    /* A second document would be silently ignored: refuse it. */
    yaml_document_t extra;
    if (!yaml_parser_load(parser, &extra)) {
        jnode at = {.origin = origin, .line = lines ? (int)parser->problem_mark.line + 1 : 0};
        return jnode_fail(&at, "YAML syntax error: %s", parser->problem ? parser->problem : "?");
    }
    yaml_node_t *extra_root = yaml_document_get_root_node(&extra);
    if (extra_root) {
        jnode at = {.origin = origin, .line = lines ? (int)extra_root->start_mark.line + 1 : 0};
        rc = jnode_fail(&at, "a job holds one YAML document; found a second one");
    }
    yaml_document_delete(&extra);
    return rc;
}

int jtree_load_file(jtree *t, const char *path) {
    const char *origin = jtree_origin_add(t, path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        error_set("%s: cannot open job file: %s", path, strerror(errno));
        return STATUS_BAD_INPUT;
    }
    yaml_parser_t parser;
    CHECK(yaml_parser_initialize(&parser), "yaml_parser_initialize failed");
    yaml_parser_set_input_file(&parser, f);
    int rc = jtree_parse(t, &parser, origin, 1, &t->root);
    yaml_parser_delete(&parser);
    fclose(f);
    if (rc) return rc;
    if (!t->root) {
        error_set("%s: the job file is empty; it needs at least a model and an input section",
                  path);
        return STATUS_BAD_INPUT;
    }
    if (t->root->type != JNODE_MAP)
        return jnode_fail(t->root, "the top level must be a mapping of sections "
                                   "(model, backend, parallel, input, generate, bench, record)");
    return STATUS_OK;
}

static void jnode_remove(jnode *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->keys[i]->value, key) == 0) {
            memmove(m->keys + i, m->keys + i + 1, (size_t)(m->n - i - 1) * sizeof *m->keys);
            memmove(m->items + i, m->items + i + 1, (size_t)(m->n - i - 1) * sizeof *m->items);
            m->n--;
            return;
        }
}

static void jnode_set(jtree *t, jnode *m, const char *key, jnode *value, const char *origin) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->keys[i]->value, key) == 0) {
            /* the key node moves to the override too, so errors and job_key_line point there */
            m->keys[i] = jnode_new(t, JNODE_SCALAR, origin, 0);
            m->keys[i]->value = strdup(key);
            CHECK(m->keys[i]->value, "out of memory");
            m->items[i] = value;
            return;
        }
    jnode *k = jnode_new(t, JNODE_SCALAR, origin, 0);
    k->value = strdup(key);
    CHECK(k->value, "out of memory");
    jnode_append(m, k, value);
}

static int jtree_name_in(const char *key, const char *const *names) {
    for (int i = 0; names && names[i]; i++)
        if (strcmp(key, names[i]) == 0) return 1;
    return 0;
}

int jtree_apply_override(jtree *t, const char *text, const char *const *raw_keys) {
    char label[1200];
    snprintf(label, sizeof label, "--set %s", text);
    const char *origin = jtree_origin_add(t, label);
    jnode at = {.origin = origin};
    const char *eq = strchr(text, '=');
    if (!eq || eq == text)
        return jnode_fail(&at, "expected SECTION.KEY=VALUE, e.g. --set parallel.tp=2");
    size_t key_len = (size_t)(eq - text);
    if (key_len >= 256) return jnode_fail(&at, "key too long");
    char key[256];
    memcpy(key, text, key_len);
    key[key_len] = '\0';
    for (size_t i = 0; i < key_len; i++) {
        char c = key[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || (c == '.' && i > 0 && i + 1 < key_len && key[i + 1] != '.');
        if (!ok)
            return jnode_fail(&at, "bad key '%s': use dotted names such as model.synthetic.layers",
                              key);
    }

    jnode *value = NULL;
    if (jtree_name_in(key, raw_keys)) {
        value = jnode_new(t, eq[1] ? JNODE_SCALAR : JNODE_NULL, origin, 0);
        if (eq[1]) {
            value->value = strdup(eq + 1);
            CHECK(value->value, "out of memory");
            value->quoted = 1;
        }
    } else {
        yaml_parser_t parser;
        CHECK(yaml_parser_initialize(&parser), "yaml_parser_initialize failed");
        yaml_parser_set_input_string(&parser, (const unsigned char *)eq + 1, strlen(eq + 1));
        int rc = jtree_parse(t, &parser, origin, 0, &value);
        yaml_parser_delete(&parser);
        if (rc) return rc;
        if (!value) value = jnode_new(t, JNODE_NULL, origin, 0);
    }

    /* Walk down the dotted path, creating sections the file lacks. */
    jnode *m = t->root;
    char *save = NULL, *seg = strtok_r(key, ".", &save), path[256] = "";
    for (;;) {
        char *next = strtok_r(NULL, ".", &save);
        if (!next) break;
        jnode *child = jnode_get(m, seg, NULL);
        if (child && child->type == JNODE_NULL) child->type = JNODE_MAP;
        if (child && child->type == JNODE_SCALAR && m == t->root && !strcmp(seg, "backend")) {
            /* "backend: cuda" plus --set backend.threads=4 becomes {kind: cuda, threads: 4} */
            jnode *kind = child;
            child = jnode_new(t, JNODE_MAP, kind->origin, kind->line);
            jnode *k = jnode_new(t, JNODE_SCALAR, kind->origin, kind->line);
            k->value = strdup("kind");
            CHECK(k->value, "out of memory");
            jnode_append(child, k, kind);
            jnode_set(t, m, seg, child, origin);
        }
        if (!child) {
            child = jnode_new(t, JNODE_MAP, origin, 0);
            jnode_set(t, m, seg, child, origin);
        } else if (child->type != JNODE_MAP) {
            return jnode_fail(&at, "'%s%s%s' holds a value, not a section of keys", path,
                              path[0] ? "." : "", seg);
        }
        size_t used = strlen(path);
        snprintf(path + used, sizeof path - used, "%s%s", used ? "." : "", seg);
        m = child;
        seg = next;
    }

    /* An override picks the input or model source: drop the file's other choice, so that
     * --set input.tokens=[...] works on a job whose file uses input.synthetic. */
    static const char *const input_sources[] = {"tokens",    "tokens_file", "text",
                                                "text_file", "synthetic",   NULL};
    if (!strcmp(path, "input"))
        for (int i = 0; input_sources[i]; i++)
            if (strcmp(seg, input_sources[i]) != 0 && jtree_name_in(seg, input_sources))
                jnode_remove(m, input_sources[i]);
    if (!strcmp(path, "model") && !strcmp(seg, "checkpoint")) jnode_remove(m, "synthetic");
    if (!strcmp(path, "model") && !strcmp(seg, "synthetic")) jnode_remove(m, "checkpoint");

    jnode *old = jnode_get(m, seg, NULL);
    if (m == t->root && !strcmp(seg, "backend") && old && old->type == JNODE_MAP &&
        value->type == JNODE_SCALAR) {
        jnode_set(t, old, "kind", value, origin); /* --set backend=cuda keeps the other keys */
        return STATUS_OK;
    }
    jnode_set(t, m, seg, value, origin);
    return STATUS_OK;
}

void jtree_free(jtree *t) {
    jnode *n = t->all;
    while (n) {
        jnode *next = n->next_alloc;
        free(n->value);
        free(n->items);
        free(n->keys);
        free(n);
        n = next;
    }
    for (int i = 0; i < t->n_origins; i++) free(t->origins[i]);
    free(t->origins);
    memset(t, 0, sizeof *t);
}
