/* Parameter sweeps of `tripar run --sweep KEY=v1,v2,...`: the cross product of the listed
 * values of each key, each point one --set override list and one run file name. */
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SWEEP_MAX_KEYS 8
#define SWEEP_MAX_VALUES 64
#define SWEEP_MAX_POINTS 4096
#define SWEEP_TEXT_MAX 256

typedef struct {
    char key[96];                     /* dotted job key, e.g. input.synthetic.length */
    char *values[SWEEP_MAX_VALUES];   /* owned, as given (YAML scalars or flow collections) */
    int n;
} sweep_axis;

typedef struct {
    sweep_axis axes[SWEEP_MAX_KEYS];
    int n_axes;
} sweep;

void sweep_init(sweep *s);
void sweep_free(sweep *s);

/* Adds one "KEY=v1,v2,..." axis. Commas inside [...] or {...} do not split, so
 * 'record.activations=[embed, logits],[final]' gives two values. Returns STATUS_OK, or
 * STATUS_BAD_INPUT with error_message() set (no '=', empty value, too many keys or values,
 * a key given twice, or more than SWEEP_MAX_POINTS points in all). */
int sweep_add(sweep *s, const char *spec);

/* Points in the cross product: 1 when there are no axes. */
long sweep_points(const sweep *s);

/* The value index along axis a of point p; the last axis varies fastest. */
int sweep_value_index(const sweep *s, long p, int a);

/* Writes "KEY=VALUE" of axis a at point p into out (size SWEEP_TEXT_MAX at least). */
void sweep_override(const sweep *s, long p, int a, char *out, size_t len);

/* The run file of point p: out with a trailing ".h5" removed, then ".KEY=VALUE" per axis in
 * axis order, then ".h5". For a path key (job_key_is_path) VALUE is the file's stem, e.g.
 * input.text_file=qa-512 for data/prompts/qa-512.txt. Characters of a value outside
 * [A-Za-z0-9._+-] become '_'. Without axes it is out itself. Returns 0, or -1 when it does not
 * fit in len. */
int sweep_point_path(const sweep *s, long p, const char *out, char *path, size_t len);

/* The first point q whose run file is also that of an earlier point (*first), or -1 when all
 * n paths differ: two swept files with one stem, or two values that become the same name. */
long sweep_path_clash(char *const *paths, long n, long *first);

#ifdef __cplusplus
}
#endif
