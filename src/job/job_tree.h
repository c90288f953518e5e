/* Private to job*.c (and analysis/plan_cluster.c, which reads cluster files with it): the job file
 * as a small tree of maps, sequences and scalars read with libyaml. Every node remembers where
 * it came from (file and line, or the --set text), so that validation can point at the exact
 * spot, and --set overrides can be grafted in. */
#pragma once
#include <stddef.h>

typedef enum { JNODE_NULL, JNODE_SCALAR, JNODE_SEQ, JNODE_MAP } jnode_type;

/* The explicit tag of a scalar (!!str 4): a tagged value is read as its tag says, so a !!str
 * is never a number and a !!float never an int. JTAG_NONE: untagged, read by its form. */
typedef enum { JTAG_NONE, JTAG_STR, JTAG_INT, JTAG_FLOAT, JTAG_BOOL } jnode_tag;

/* Limits checked while libyaml's events arrive, before any of the tree is built beyond them:
 * a file nested 100k levels deep or holding millions of nodes costs milliseconds, not minutes
 * (libyaml's own document loader is quadratic in the depth). Aliases ("billion laughs") are
 * expanded under the same node count. */
#define JTREE_MAX_BYTES (16L << 20) /* a job file; long token lists go in input.tokens_file */
/* nodes after alias expansion, keys included; the fuzz target lowers it, to reach it fast */
#ifndef JTREE_MAX_NODES
#define JTREE_MAX_NODES 1000000L
#endif
#define JTREE_MAX_DEPTH 32      /* nested collections; a job needs 4 */
#define JTREE_MAX_MAP_KEYS 256  /* keys of one mapping; a section has at most 8 */
#define JTREE_MAX_ANCHORS 64    /* distinct &anchors in one document */
#define JTREE_MAX_DIRECTIVES 16 /* lines starting with '%' (%YAML, %TAG) */

typedef struct jnode jnode;
struct jnode {
    jnode_type type;
    char *value;        /* scalar text, owned; NULL otherwise */
    int quoted;         /* a quoted or !!str scalar is a string, never a number or a bool */
    jnode_tag tag;      /* explicit tag of a scalar, JTAG_NONE when untagged */
    const char *origin; /* job file path, or "--set KEY=VALUE"; owned by the tree */
    int line;           /* 1-based line in origin, 0 for --set */
    int n, cap;
    jnode **items;     /* sequence items, or map values */
    jnode **keys;      /* map keys (scalars), parallel to items */
    jnode *next_alloc; /* every node of a tree is chained here, for freeing */
};

typedef struct {
    jnode *root;
    jnode *all;
    long n_nodes;
    char **origins;
    int n_origins;
} jtree;

/* Reads path into t->root (a mapping). STATUS_BAD_INPUT with "path:line: ..." on error; a path
 * that is not a regular file (a directory, a FIFO) is refused before it is opened. */
int jtree_load_file(jtree *t, const char *path);
/* Grafts "a.b.c=VALUE" into t->root, creating sections as needed. VALUE is parsed as YAML,
 * except for keys in raw_keys (dotted, NULL-terminated), whose value is taken verbatim. text
 * may start with the option that gave it, "--set " or "--sweep ", which messages then name
 * ("--set " when it has none). */
int jtree_apply_override(jtree *t, const char *text, const char *const *raw_keys);
void jtree_free(jtree *t);

/* 0 when the string s is valid UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF); otherwise -1 with *bad the offset of the first byte of the bad sequence. Text that
 * reaches a job without passing libyaml (a verbatim --set value, input.text_file) is checked
 * with it: the resolved job is written back as YAML, which cannot hold other bytes. */
int jtree_utf8_check(const char *s, size_t *bad);
/* The length in bytes of the valid UTF-8 sequence at s (with its code point in *cp), or 0. */
int jtree_utf8_decode(const unsigned char *s, unsigned *cp);

/* The value of key in map m (NULL when m is NULL, not a map, or lacks key); *key_node gets
 * the key's own node when key_node is not NULL. */
jnode *jnode_get(const jnode *m, const char *key, const jnode **key_node);
/* Sets error_message() to "origin:line: message" (or "--set ...: message") and returns
 * STATUS_BAD_INPUT. */
int jnode_fail(const jnode *at, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "'text'", "the string 'text'", "a sequence", "a mapping" or "nothing": for messages. */
const char *jnode_describe(const jnode *v, char *buf, int size);
