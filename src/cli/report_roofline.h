/* `tripar report --roofline` (report_roofline.c): prints the per-phase rooflines that
 * analysis/run_roofline.c computes. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* `tripar report --roofline FILE...`: the table of each file's slowest rank, as text, and as
 * CSV / JSON rows when csv / json name files (NULL: none). Returns the exit code: 0, or 2 with
 * one "tripar report: ..." line on stderr. */
int report_roofline(const char *const *files, int n, const char *csv, const char *json);

#ifdef __cplusplus
}
#endif
