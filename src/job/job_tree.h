/* Private to job*.c: the job file as a small tree of maps, sequences and scalars read with
 * libyaml. Every node remembers where it came from (file and line, or the --set text), so
 * that validation can point at the exact spot, and --set overrides can be grafted in. */
#pragma once

typedef enum { JNODE_NULL, JNODE_SCALAR, JNODE_SEQ, JNODE_MAP } jnode_type;

typedef struct jnode jnode;
struct jnode {
    jnode_type type;
    char *value;        /* scalar text, owned; NULL otherwise */
    int quoted;         /* a quoted scalar is a string, never a number or a bool */
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

/* Reads path into t->root (a mapping). STATUS_BAD_INPUT with "path:line: ..." on error. */
int jtree_load_file(jtree *t, const char *path);
/* Grafts "a.b.c=VALUE" into t->root, creating sections as needed. VALUE is parsed as YAML,
 * except for keys in raw_keys (dotted, NULL-terminated), whose value is taken verbatim. */
int jtree_apply_override(jtree *t, const char *text, const char *const *raw_keys);
void jtree_free(jtree *t);

/* The value of key in map m (NULL when m is NULL, not a map, or lacks key); *key_node gets
 * the key's own node when key_node is not NULL. */
jnode *jnode_get(const jnode *m, const char *key, const jnode **key_node);
/* Sets error_message() to "origin:line: message" (or "--set ...: message") and returns
 * STATUS_BAD_INPUT. */
int jnode_fail(const jnode *at, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "'text'", "the string 'text'", "a sequence", "a mapping" or "nothing": for messages. */
const char *jnode_describe(const jnode *v, char *buf, int size);
