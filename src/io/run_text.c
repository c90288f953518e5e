/* Reads /output/generated_text with the counts and tokens beside it, and prints it (run_text.h).
 * Serial: rank 0 after the run file is finished, and report. */
#include "io/run_text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/h5util.h"

void run_text_line_print(FILE *out, const char *s, size_t n, size_t max) {
    size_t cut = n > max ? max : n;
    while (cut < n && cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--;
    for (size_t i = 0; i < cut; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", out);
        else if (c == '\t') fputs("\\t", out);
        else if (c < 0x20 || c == 0x7F) fprintf(out, "\\x%02x", c);
        else fputc(c, out);
    }
    fputs(cut < n ? " ...\n" : "\n", out);
}

void run_text_print(FILE *out, hid_t file) {
    if (!h5_exists(file, "output/generated_text")) return;
    double eos_id = -1;
    hid_t group = H5Gopen2(file, "output", H5P_DEFAULT);
    if (group >= 0) {
        if (h5_attr_read_double(group, "eos_id", &eos_id) != 0) eos_id = -1;
        H5Gclose(group);
    }
    hid_t d = H5Dopen2(file, "output/generated_text", H5P_DEFAULT);
    if (d < 0) return;
    hid_t ft = H5Dget_type(d), space = H5Dget_space(d);
    hssize_t rows = H5Sget_simple_extent_npoints(space);
    size_t width = H5Tget_size(ft);
    char *buf = NULL;
    int ok = rows >= 0 && width > 0 && H5Tget_class(ft) == H5T_STRING && !H5Tis_variable_str(ft);
    if (ok) {
        buf = xcalloc((size_t)(rows > 0 ? rows : 1), width + 1);
        hid_t mt = h5_string_type(width);
        ok = H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0;
        H5Tclose(mt);
    }
    H5Sclose(space);
    H5Tclose(ft);
    H5Dclose(d);
    if (!ok) {
        free(buf);
        return;
    }
    int nd = 0;
    hsize_t gdims[8] = {0}, tdims[8] = {0};
    long ng = 0;
    int32_t *gen = h5_dataset_read_all(file, "output/generated", H5T_NATIVE_INT32, &nd, gdims, &ng);
    int32_t *tok = h5_dataset_read_all(file, "output/tokens", H5T_NATIVE_INT32, &nd, tdims, NULL);
    const long cols = tok && nd == 2 ? (long)tdims[1] : 0;
    for (long r = 0; r < rows && r < RUN_TEXT_ROWS; r++) {
        char label[32];
        snprintf(label, sizeof label, "answer %ld", r);
        fprintf(out, "  %-13s ", label);
        if (gen && r < ng) {
            long g = gen[r];
            /* every position after the row's last generated token is -1 */
            int ends_eos = 0;
            if (tok && cols > 0 && eos_id >= 0 && g > 0) {
                long last = cols - 1;
                while (last >= 0 && tok[r * cols + last] < 0) last--;
                ends_eos = last >= 0 && tok[r * cols + last] == eos_id;
            }
            fprintf(out, "(%ld token%s%s) ", g, g == 1 ? "" : "s", ends_eos ? ", eos" : "");
        }
        const char *row = buf + (size_t)r * width;
        run_text_line_print(out, row, strnlen(row, (size_t)width), RUN_TEXT_BYTES);
    }
    if (rows > RUN_TEXT_ROWS)
        fprintf(out, "  %-13s ... %lld more in /output/generated_text\n", "",
                (long long)(rows - RUN_TEXT_ROWS));
    free(gen);
    free(tok);
    free(buf);
}

void run_text_print_path(FILE *out, const char *path) {
    hid_t file = h5_open_read(path);
    if (file < 0) return;
    run_text_print(out, file);
    H5Fclose(file);
}
