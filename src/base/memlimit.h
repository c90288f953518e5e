/* How much memory this process may still allocate on its node: the kernel's MemAvailable and
 * the room left under its cgroup's memory limit (v2 memory.max, or v1 memory.limit_in_bytes),
 * read before a run allocates, so a plan that cannot fit is refused instead of being ended by
 * the OOM killer. The parsers take the files' text, so the tests run them on fixtures; the
 * reader takes the roots it reads under, so a test can point it at a fixture tree. */
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "No limit": a missing MemAvailable, no cgroup limit, v2's "max", v1's page-rounded LONG_MAX. */
#define MEMLIMIT_NONE (~0ull)

typedef struct {
    unsigned long long mem_available; /* bytes of /proc/meminfo's MemAvailable */
    unsigned long long cgroup_room;   /* bytes: limit - usage + inactive file pages, at the
                                         cgroup level (own or an ancestor's) that binds */
    unsigned long long cgroup_limit, cgroup_usage, cgroup_inactive; /* that level's numbers */
    int cgroup_version;                                             /* 1 or 2; 0 when no limit */
    char cgroup_dir[512]; /* that level's directory, for messages */
} memlimit;

/* The value of key ("MemAvailable") in /proc/meminfo's text, in bytes (the file says kB).
 * 0, or -1 when the key is absent or malformed. */
int memlimit_parse_meminfo(const char *text, const char *key, unsigned long long *bytes);

/* The process's cgroup path from /proc/self/cgroup's text: version 2 takes the "0::PATH" line,
 * version 1 the line whose controller list holds "memory". 0, or -1 when there is none. */
int memlimit_parse_proc_cgroup(const char *text, int version, char *path, size_t len);

/* From /proc/self/mountinfo's text, where the cgroup hierarchy of that version is mounted
 * (version 1: the one with the memory controller) and which cgroup its root is (the fourth
 * field: "/" unless the mount shows a subtree, as in a container without a cgroup namespace).
 * 0, or -1 when it is not mounted. */
int memlimit_parse_mountinfo(const char *text, int version, char *mount_point, size_t mp_len,
                             char *root, size_t root_len);

/* A limit or usage file's single number; "max" (v2) and values of 2^60 or more (v1's
 * "unlimited", LONG_MAX rounded to a page) are MEMLIMIT_NONE. 0, or -1 when malformed. */
int memlimit_parse_value(const char *text, unsigned long long *value);

/* The value of key in a memory.stat file's text ("inactive_file 4096" lines). 0 or -1. */
int memlimit_parse_stat(const char *text, const char *key, unsigned long long *value);

/* Reads what this process may allocate: proc_dir is "/proc" and sys_root "" for the live
 * system; a test passes a fixture's proc directory and the prefix its mount points live
 * under. The cgroup room is the smallest over the process's cgroup and its ancestors up to the
 * mount, over both versions (a hybrid host may have either). Files that are missing or
 * unreadable mean no limit from them: the check can only refuse on a limit it has read. */
void memlimit_read_at(memlimit *out, const char *proc_dir, const char *sys_root);
void memlimit_read(memlimit *out);

/* The smaller of the two, and which it was: "MemAvailable" or "cgroup". */
unsigned long long memlimit_have(const memlimit *m, const char **which);

#ifdef __cplusplus
}
#endif
