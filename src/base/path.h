/* Checks on the files a command reads and writes, made before any compute, so that a bad
 * path costs the user seconds and never an input: an output may not be an input (compared by
 * device and inode, so links and "./x" vs "x" are caught), may not be a directory or a device
 * node, and its directory must exist; an input must be a regular file, so a FIFO with no
 * writer is refused instead of blocking forever. Plain POSIX, no MPI: the caller decides
 * whether one rank checks and broadcasts, or every rank checks the same shared file system. */
#pragma once
#include <stddef.h>

/* Why a path was refused, as a phrase that completes "PATH ...": "is a directory". */
#define PATH_WHY_MAX 160

/* 0 when path names an existing regular file; otherwise -1 with why filled in
 * ("does not exist", "is a directory", "is a FIFO, not a regular file", ...). */
int path_check_input(const char *path, char *why, size_t why_size);

/* 0 when path can be created or replaced as an output: it is non-empty, its directory exists
 * and is a directory, and if the path exists it is a regular file. -1 with why otherwise. */
int path_check_output(const char *path, char *why, size_t why_size);

/* 1 when both paths exist and name the same file (same device and inode), else 0. */
int path_same_file(const char *a, const char *b);

/* 1 when a and b are, or once written will be, the same file: the same device and inode when
 * both exist, the same name in the same directory (compared by inode) when neither does, and 0
 * when only one exists. For two outputs, which may not exist yet. */
int path_same_target(const char *a, const char *b);

/* 1 when output names one of inputs[0..n_inputs) (NULL and "" entries are skipped); then
 * *which is the index of that input. */
int path_is_any_of(const char *output, const char *const *inputs, int n_inputs, int *which);

/* Reads a whole regular file into a NUL-terminated buffer the caller frees; *len (may be
 * NULL) gets its length. A FIFO, directory or device is refused before it is opened, so a
 * reader never blocks. NULL on failure, with error_set("PATH: why"). */
char *path_read_file(const char *path, size_t *len);
