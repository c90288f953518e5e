/* Reads a job file with libyaml into a jnode tree that keeps each node's origin, and grafts
 * --set overrides into it. Validation of keys and values lives in job.c. */
#include "job/job_tree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "base/check.h"
#include "base/path.h"

#define TRY_TREE(expr)                                                                             \
    do {                                                                                           \
        int rc_try_ = (expr);                                                                      \
        if (rc_try_) return rc_try_;                                                               \
    } while (0)

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
    static const char *const tags[] = {"", "", " (tagged !!int)", " (tagged !!float)",
                                       " (tagged !!bool)"};
    /* the first 60 bytes, control characters as \xHH so none reaches the terminal raw */
    char shown[256];
    size_t n = 0;
    for (int i = 0; v->value[i] && i < 60; i++) {
        unsigned char c = (unsigned char)v->value[i];
        if (c < 0x20 || c == 0x7F)
            n += (size_t)snprintf(shown + n, sizeof shown - n, "\\x%02X", c);
        else
            shown[n++] = (char)c;
    }
    shown[n] = '\0';
    snprintf(buf, (size_t)size, "%s'%s%s'%s", v->quoted ? "the string " : "", shown,
             strlen(v->value) > 60 ? "..." : "", tags[v->tag]);
    return buf;
}

int jtree_utf8_decode(const unsigned char *s, unsigned *cp) {
    int len = s[0] < 0x80                    ? 1
              : s[0] >= 0xC2 && s[0] <= 0xDF ? 2
              : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
              : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4
                                             : 0;
    if (len == 0) return 0;
    unsigned c = len == 1 ? s[0] : s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0; /* also stops at the terminating NUL */
        c = (c << 6) | (s[i] & 0x3F);
    }
    static const unsigned least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

int jtree_utf8_check(const char *s, size_t *bad) {
    for (size_t i = 0; s[i];) {
        unsigned cp;
        int len = jtree_utf8_decode((const unsigned char *)s + i, &cp);
        if (len == 0) {
            *bad = i;
            return -1;
        }
        i += (size_t)len;
    }
    return 0;
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

/* ---- the event-driven builder ---------------------------------------------------------- */

/* libyaml's yaml_parser_load builds the whole document before anything can be checked, and it
 * is quadratic in the nesting depth: a 100k-deep file took a minute. The tree is built here
 * from yaml_parser_parse's events instead, so every limit of job_tree.h is checked the moment
 * an event would cross it, and nothing past that point is read. */

typedef struct {
    jnode *node;  /* the open sequence or mapping */
    jnode *key;   /* a mapping's key still waiting for its value */
    char *anchor; /* &name of this collection, registered when it closes; owned */
} jframe;

typedef struct {
    char *name; /* owned */
    jnode *node;
} janchor;

typedef struct {
    jtree *t;
    const char *origin;
    const char *text; /* the whole input, to turn a reader error's byte offset into a line */
    size_t len;
    int lines; /* 1: line numbers from marks (a file); 0: none (a --set value) */
    jframe stack[JTREE_MAX_DEPTH + 1];
    int depth; /* open collections */
    janchor anchors[JTREE_MAX_ANCHORS];
    int n_anchors;
    jnode *root;
} jbuild;

static void jbuild_free(jbuild *b) {
    for (int i = 0; i < b->depth; i++)
        free(b->stack[i].anchor);
    for (int i = 0; i < b->n_anchors; i++)
        free(b->anchors[i].name);
}

static int jbuild_line(const jbuild *b, yaml_mark_t mark) {
    return b->lines ? (int)mark.line + 1 : 0;
}

/* The 1-based line of byte offset in the input, counting line breaks as libyaml does (LF,
 * CR LF, a lone CR, and the UTF-8 NEL, LS and PS). */
static int jbuild_offset_line(const jbuild *b, size_t offset) {
    const unsigned char *s = (const unsigned char *)b->text;
    int line = 1;
    for (size_t i = 0; i < offset && i < b->len; i++) {
        if (s[i] == '\n' || (s[i] == '\r' && (i + 1 >= b->len || s[i + 1] != '\n')))
            line++;
        else if (s[i] == 0xC2 && i + 1 < b->len && s[i + 1] == 0x85)
            line++, i++;
        else if (s[i] == 0xE2 && i + 2 < b->len && s[i + 1] == 0x80 &&
                 (s[i + 2] == 0xA8 || s[i + 2] == 0xA9))
            line++, i += 2;
    }
    return line;
}

static int jbuild_syntax_error(const jbuild *b, const yaml_parser_t *parser) {
    if (parser->error == YAML_READER_ERROR) {
        /* libyaml gives a reader error (bad UTF-8, a control character) only a byte offset:
         * its mark still points at the last token scanned, often lines earlier. */
        jnode at = {.origin = b->origin,
                    .line = b->lines ? jbuild_offset_line(b, parser->problem_offset) : 0};
        return jnode_fail(&at,
                          "%s at byte offset %zu; a job file is UTF-8 text without control "
                          "characters",
                          parser->problem ? parser->problem : "?", parser->problem_offset);
    }
    jnode at = {.origin = b->origin, .line = jbuild_line(b, parser->problem_mark)};
    char opened[64] = "";
    if (parser->context && b->lines && parser->context_mark.line != parser->problem_mark.line)
        snprintf(opened, sizeof opened, " that starts on line %d",
                 (int)parser->context_mark.line + 1);
    return jnode_fail(&at, "YAML syntax error: %s%s%s%s", parser->problem ? parser->problem : "?",
                      parser->context ? " " : "", parser->context ? parser->context : "", opened);
}

static int jbuild_too_many_nodes(const jbuild *b, int line) {
    jnode at = {.origin = b->origin, .line = line};
    return jnode_fail(&at,
                      "more than %ld YAML nodes (aliases expanding too far?); "
                      "give long token lists with input.tokens_file",
                      JTREE_MAX_NODES);
}

static int jbuild_too_deep(const jbuild *b, int line, const char *why) {
    jnode at = {.origin = b->origin, .line = line};
    return jnode_fail(&at, "nesting deeper than %d levels%s; a job needs 4", JTREE_MAX_DEPTH, why);
}

/* Hangs a finished scalar, a copied alias or a just-opened collection under the open
 * collection (or makes it the root). */
static int jbuild_attach(jbuild *b, jnode *n) {
    if (b->depth == 0) {
        b->root = n;
        return STATUS_OK;
    }
    jframe *f = &b->stack[b->depth - 1];
    if (f->node->type == JNODE_SEQ) {
        jnode_append(f->node, NULL, n);
        return STATUS_OK;
    }
    if (f->key) {
        jnode_append(f->node, f->key, n);
        f->key = NULL;
        return STATUS_OK;
    }
    if (n->type != JNODE_SCALAR)
        return jnode_fail(n, "a key must be a plain name, got %s",
                          n->type == JNODE_NULL ? "an empty key" : "a collection");
    const jnode *first = NULL;
    if (jnode_get(f->node, n->value, &first)) {
        if (first->line > 0)
            return jnode_fail(n, "duplicate key '%s' (first given on line %d)", n->value,
                              first->line);
        return jnode_fail(n, "duplicate key '%s'", n->value);
    }
    /* also what keeps the duplicate check above linear per key */
    if (f->node->n >= JTREE_MAX_MAP_KEYS)
        return jnode_fail(n, "more than %d keys in one mapping; no job section has more than 8",
                          JTREE_MAX_MAP_KEYS);
    f->key = n;
    return STATUS_OK;
}

static jnode *jbuild_anchor_find(const jbuild *b, const char *name) {
    for (int i = b->n_anchors - 1; i >= 0; i--)
        if (!strcmp(b->anchors[i].name, name)) return b->anchors[i].node;
    return NULL;
}

static int jbuild_anchor_add(jbuild *b, const yaml_char_t *name, jnode *node, int line) {
    for (int i = 0; i < b->n_anchors; i++)
        if (!strcmp(b->anchors[i].name, (const char *)name)) { /* a later &name wins (YAML) */
            b->anchors[i].node = node;
            return STATUS_OK;
        }
    if (b->n_anchors == JTREE_MAX_ANCHORS) {
        jnode at = {.origin = b->origin, .line = line};
        return jnode_fail(&at, "more than %d anchors (&name) in one job", JTREE_MAX_ANCHORS);
    }
    b->anchors[b->n_anchors].name = strdup((const char *)name);
    CHECK(b->anchors[b->n_anchors].name, "out of memory");
    b->anchors[b->n_anchors++].node = node;
    return STATUS_OK;
}

/* A deep copy of src at depth: an alias expands into its own nodes, as the tree was built
 * before, so that --set grafts never reach two places at once. Copies count against the node
 * and depth limits, which is what stops a "billion laughs" file. */
static int jbuild_copy(jbuild *b, const jnode *src, int depth, int line, jnode **out) {
    int collection = src->type == JNODE_SEQ || src->type == JNODE_MAP;
    if (collection && depth >= JTREE_MAX_DEPTH) /* counted as jbuild_open counts */
        return jbuild_too_deep(b, line, " (through an alias)");
    if (b->t->n_nodes >= JTREE_MAX_NODES) return jbuild_too_many_nodes(b, line);
    jnode *n = jnode_new(b->t, src->type, src->origin, src->line);
    n->quoted = src->quoted;
    n->tag = src->tag;
    if (src->value) {
        n->value = strdup(src->value);
        CHECK(n->value, "out of memory");
    }
    *out = n;
    for (int i = 0; i < src->n; i++) {
        jnode *key = NULL, *item = NULL;
        if (src->type == JNODE_MAP) {
            int rc = jbuild_copy(b, src->keys[i], depth + 1, line, &key);
            if (rc) return rc;
        }
        int rc = jbuild_copy(b, src->items[i], depth + 1, line, &item);
        if (rc) return rc;
        jnode_append(n, key, item);
    }
    return STATUS_OK;
}

static int scalar_is_null(const char *v) {
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

#define YAML_TAG_PREFIX "tag:yaml.org,2002:"

/* The tags a job may use: the core schema's scalar tags, "!" (a non-specific tag, which YAML
 * reads as a string) and !!seq / !!map on collections. Anything else (!!binary, !!timestamp,
 * a local !thing) would be read as something it is not, so it is refused. */
static int jbuild_tag(const jbuild *b, const yaml_char_t *tag, yaml_event_type_t kind, int line,
                      jnode_tag *out, int *is_null) {
    *out = JTAG_NONE;
    *is_null = 0;
    if (!tag) return STATUS_OK;
    const char *s = (const char *)tag;
    const char *name =
        !strncmp(s, YAML_TAG_PREFIX, strlen(YAML_TAG_PREFIX)) ? s + strlen(YAML_TAG_PREFIX) : NULL;
    if (kind == YAML_SCALAR_EVENT) {
        if (!strcmp(s, "!") || (name && !strcmp(name, "str"))) return *out = JTAG_STR, STATUS_OK;
        if (name && !strcmp(name, "int")) return *out = JTAG_INT, STATUS_OK;
        if (name && !strcmp(name, "float")) return *out = JTAG_FLOAT, STATUS_OK;
        if (name && !strcmp(name, "bool")) return *out = JTAG_BOOL, STATUS_OK;
        if (name && !strcmp(name, "null")) return *is_null = 1, STATUS_OK;
    } else if (name && !strcmp(name, kind == YAML_SEQUENCE_START_EVENT ? "seq" : "map")) {
        return STATUS_OK;
    }
    jnode at = {.origin = b->origin, .line = line};
    return jnode_fail(&at,
                      "the tag '%s%.60s' is not allowed here; a job uses plain YAML values "
                      "(tags allowed: !!str, !!int, !!float, !!bool, !!null, !!seq, !!map)",
                      name ? "!!" : "", name ? name : s);
}

static int jbuild_scalar(jbuild *b, const yaml_event_t *ev) {
    int line = jbuild_line(b, ev->start_mark);
    const char *value = (const char *)ev->data.scalar.value;
    size_t length = ev->data.scalar.length;
    jnode_tag tag;
    int tagged_null;
    int rc = jbuild_tag(b, ev->data.scalar.tag, YAML_SCALAR_EVENT, line, &tag, &tagged_null);
    if (rc) return rc;
    jnode probe = {.origin = b->origin, .line = line};
    if (memchr(value, '\0', length)) /* "\0" in a double-quoted scalar; C strings end there */
        return jnode_fail(&probe, "a value holds a NUL character (\\0)");
    int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    if (tagged_null && !scalar_is_null(value))
        return jnode_fail(&probe, "'%.60s' is tagged !!null but is not null", value);
    jnode *n = NULL;
    if (tagged_null || (plain && tag == JTAG_NONE && scalar_is_null(value))) {
        n = jnode_new(b->t, JNODE_NULL, b->origin, line);
    } else {
        n = jnode_new(b->t, JNODE_SCALAR, b->origin, line);
        n->value = strdup(value);
        CHECK(n->value, "out of memory");
        /* an explicit tag decides; untagged, only the plain form may be a number or a bool */
        n->tag = tag;
        n->quoted = tag == JTAG_STR || (tag == JTAG_NONE && !plain);
    }
    if (ev->data.scalar.anchor) TRY_TREE(jbuild_anchor_add(b, ev->data.scalar.anchor, n, line));
    return jbuild_attach(b, n);
}

static int jbuild_open(jbuild *b, const yaml_event_t *ev) {
    int line = jbuild_line(b, ev->start_mark);
    int seq = ev->type == YAML_SEQUENCE_START_EVENT;
    if (b->depth >= JTREE_MAX_DEPTH) return jbuild_too_deep(b, line, "");
    jnode_tag tag;
    int tagged_null;
    TRY_TREE(jbuild_tag(b, seq ? ev->data.sequence_start.tag : ev->data.mapping_start.tag, ev->type,
                        line, &tag, &tagged_null));
    jnode *n = jnode_new(b->t, seq ? JNODE_SEQ : JNODE_MAP, b->origin, line);
    TRY_TREE(jbuild_attach(b, n));
    const yaml_char_t *anchor =
        seq ? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor;
    jframe *f = &b->stack[b->depth++];
    f->node = n;
    f->key = NULL;
    f->anchor = NULL;
    if (anchor) {
        f->anchor = strdup((const char *)anchor);
        CHECK(f->anchor, "out of memory");
    }
    return STATUS_OK;
}

static int jbuild_close(jbuild *b, const yaml_event_t *ev) {
    jframe *f = &b->stack[--b->depth];
    int rc = STATUS_OK;
    if (f->anchor)
        rc = jbuild_anchor_add(b, (const yaml_char_t *)f->anchor, f->node,
                               jbuild_line(b, ev->start_mark));
    free(f->anchor);
    f->anchor = NULL;
    return rc;
}

static int jbuild_alias(jbuild *b, const yaml_event_t *ev) {
    int line = jbuild_line(b, ev->start_mark);
    const char *name = (const char *)ev->data.alias.anchor;
    jnode at = {.origin = b->origin, .line = line};
    for (int i = 0; i < b->depth; i++)
        if (b->stack[i].anchor && !strcmp(b->stack[i].anchor, name))
            return jnode_fail(&at,
                              "alias '*%.60s' refers to a collection that holds it (a "
                              "recursive alias)",
                              name);
    const jnode *src = jbuild_anchor_find(b, name);
    if (!src) return jnode_fail(&at, "alias '*%.60s' has no anchor '&%.60s' before it", name, name);
    jnode *copy = NULL;
    TRY_TREE(jbuild_copy(b, src, b->depth, line, &copy));
    return jbuild_attach(b, copy);
}

/* One event into the tree. *done is set at the end of the stream. */
static int jbuild_event(jbuild *b, const yaml_event_t *ev, int *documents, int *done) {
    int line = jbuild_line(b, ev->start_mark);
    if (b->t->n_nodes >= JTREE_MAX_NODES) return jbuild_too_many_nodes(b, line);
    switch (ev->type) {
    case YAML_SCALAR_EVENT: return jbuild_scalar(b, ev);
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: return jbuild_open(b, ev);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: return jbuild_close(b, ev);
    case YAML_ALIAS_EVENT: return jbuild_alias(b, ev);
    case YAML_DOCUMENT_START_EVENT: ++*documents; return STATUS_OK;
    case YAML_STREAM_END_EVENT: *done = 1; return STATUS_OK;
    default: return STATUS_OK; /* stream start, document end */
    }
}

/* libyaml compares each %TAG directive with every earlier one before it gives the document's
 * first event, so 200k of them (4 MB) take minutes where no event can stop them. A directive
 * starts at column 0 with '%', and no job needs more than a few: count such lines first. */
static int jbuild_directives_check(const jbuild *b) {
    int count = 0;
    for (size_t i = 0; i < b->len; i++) {
        if (b->text[i] != '%' || (i > 0 && b->text[i - 1] != '\n' && b->text[i - 1] != '\r'))
            continue;
        if (++count > JTREE_MAX_DIRECTIVES) {
            jnode at = {.origin = b->origin, .line = b->lines ? jbuild_offset_line(b, i) : 0};
            return jnode_fail(&at,
                              "more than %d YAML directives (lines starting with '%%'); a job "
                              "needs none",
                              JTREE_MAX_DIRECTIVES);
        }
    }
    return STATUS_OK;
}

/* Parses the one YAML document of an open parser into *out (NULL when the input holds none).
 * text/len is the parser's input, for the lines of reader errors. */
static int jtree_parse(jtree *t, yaml_parser_t *parser, const char *origin, const char *text,
                       size_t len, int lines, jnode **out) {
    jbuild b = {.t = t, .origin = origin, .text = text, .len = len, .lines = lines};
    *out = NULL;
    TRY_TREE(jbuild_directives_check(&b));
    int rc = STATUS_OK, documents = 0, done = 0;
    while (!rc && !done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(parser, &ev)) {
            rc = jbuild_syntax_error(&b, parser);
            break;
        }
        if (documents == 1 && ev.type == YAML_DOCUMENT_START_EVENT) {
            /* a second document would be silently ignored: refuse it, at its first node */
            yaml_event_delete(&ev);
            jnode at = {.origin = origin};
            if (!yaml_parser_parse(parser, &ev)) {
                rc = jbuild_syntax_error(&b, parser);
                break;
            }
            at.line = jbuild_line(&b, ev.start_mark);
            yaml_event_delete(&ev);
            rc = jnode_fail(&at, "a job holds one YAML document; found a second one");
            break;
        }
        rc = jbuild_event(&b, &ev, &documents, &done);
        yaml_event_delete(&ev);
    }
    jbuild_free(&b);
    if (!rc) *out = b.root;
    return rc;
}

/* Reads a whole regular file of at most JTREE_MAX_BYTES into *text (NUL-terminated). */
static int jtree_read_file(const char *path, char **text, size_t *len) {
    char why[PATH_WHY_MAX];
    struct stat st;
    if (stat(path, &st) != 0) { /* the plain message for the common case of a wrong name */
        error_set("%s: cannot open job file: %s", path, strerror(errno));
        return STATUS_BAD_INPUT;
    }
    if (path_check_input(path, why, sizeof why) != 0) { /* before open: a FIFO would block */
        error_set("%s: cannot open job file: it %s", path, why);
        return STATUS_BAD_INPUT;
    }
    if (st.st_size > JTREE_MAX_BYTES) {
        error_set("%s: the job file is %lld bytes, more than the limit of %ld MiB; give long "
                  "token lists with input.tokens_file",
                  path, (long long)st.st_size, JTREE_MAX_BYTES >> 20);
        return STATUS_BAD_INPUT;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        error_set("%s: cannot open job file: %s", path, strerror(errno));
        return STATUS_BAD_INPUT;
    }
    /* one byte past the size stat gave: a file that grew since is refused, not cut short */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0 || n == cap) break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed || n == cap) {
        free(buf);
        error_set("%s: %s", path,
                  failed ? "cannot read job file" : "the job file changed while it was read");
        return STATUS_BAD_INPUT;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return STATUS_OK;
}

int jtree_load_file(jtree *t, const char *path) {
    const char *origin = jtree_origin_add(t, path);
    char *text = NULL;
    size_t len = 0;
    int rc = jtree_read_file(path, &text, &len);
    if (rc) return rc;
    yaml_parser_t parser;
    CHECK(yaml_parser_initialize(&parser), "yaml_parser_initialize failed");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    rc = jtree_parse(t, &parser, origin, text, len, 1, &t->root);
    yaml_parser_delete(&parser);
    free(text);
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
    /* the option that gave the override, for messages: --sweep points come prefixed */
    const char *option = "--set";
    if (!strncmp(text, "--sweep ", 8))
        option = "--sweep", text += 8;
    else if (!strncmp(text, "--set ", 6))
        text += 6;
    char label[1200];
    snprintf(label, sizeof label, "%s %s", option, text);
    const char *origin = jtree_origin_add(t, label);
    jnode at = {.origin = origin};
    const char *eq = strchr(text, '=');
    if (!eq || eq == text)
        return jnode_fail(&at, "expected SECTION.KEY=VALUE, e.g. %s parallel.tp=2", option);
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
    size_t bad = 0;
    if (jtree_name_in(key, raw_keys) && jtree_utf8_check(eq + 1, &bad) != 0)
        return jnode_fail(&at, "the value is not UTF-8 text (a bad byte 0x%02X at offset %zu)",
                          (unsigned char)eq[1 + bad], bad);
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
        int rc = jtree_parse(t, &parser, origin, eq + 1, strlen(eq + 1), 0, &value);
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
