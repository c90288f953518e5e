/* The generated text of a run file (/output/generated_text), read back and printed per
 * sequence by `tripar run` and `tripar report`. */
#pragma once
#include <hdf5.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One line per sequence, "  answer I      (N tokens[, eos]) TEXT": the first RUN_TEXT_ROWS
 * sequences, each cut at RUN_TEXT_BYTES bytes (on a character boundary) with its newlines
 * shown as \n, then how many were left out. Prints nothing when the file has no
 * /output/generated_text. A row that ended at the eos id (/output's eos_id attribute) says so. */
#define RUN_TEXT_ROWS 8
#define RUN_TEXT_BYTES 240
void run_text_print(FILE *out, hid_t file);
/* One text s[0..n) on one line, then a newline: newlines, tabs and other control bytes shown
 * as \n, \t, \xHH, cut at max bytes where a UTF-8 character begins (" ..." marks a cut). */
void run_text_line_print(FILE *out, const char *s, size_t n, size_t max);
/* The same for a file by path (rank 0 of `tripar run`, after the file is finished). */
void run_text_print_path(FILE *out, const char *path);

#ifdef __cplusplus
}
#endif
