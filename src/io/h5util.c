/* Small HDF5 helpers shared by the run file writer and the run-file tools (see h5util.h). */
#include "io/h5util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/check.h"
#include "metrics/timing.h"

hid_t h5_string_type(size_t size) {
    hid_t type = H5Tcopy(H5T_C_S1);
    H5_CHECK(type);
    H5_CHECK(H5Tset_size(type, size ? size : 1));
    H5_CHECK(H5Tset_strpad(type, H5T_STR_NULLTERM));
    return type;
}

hid_t h5_phase_enum_type(void) {
    hid_t t = H5Tenum_create(H5T_NATIVE_INT32);
    H5_CHECK(t);
    for (int32_t p = 0; p < PHASE_COUNT; p++) H5_CHECK(H5Tenum_insert(t, phase_name(p), &p));
    return t;
}

hid_t h5_timing_event_type(void) {
    hid_t ph = h5_phase_enum_type();
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(timing_event));
    H5_CHECK(t);
    H5_CHECK(H5Tinsert(t, "step", HOFFSET(timing_event, step), H5T_NATIVE_INT32));
    H5_CHECK(H5Tinsert(t, "microbatch", HOFFSET(timing_event, microbatch), H5T_NATIVE_INT32));
    H5_CHECK(H5Tinsert(t, "layer", HOFFSET(timing_event, layer), H5T_NATIVE_INT32));
    H5_CHECK(H5Tinsert(t, "phase", HOFFSET(timing_event, phase), ph));
    H5_CHECK(H5Tinsert(t, "iteration", HOFFSET(timing_event, iteration), H5T_NATIVE_INT32));
    H5_CHECK(H5Tinsert(t, "t_start", HOFFSET(timing_event, t_start), H5T_NATIVE_DOUBLE));
    H5_CHECK(H5Tinsert(t, "t_end", HOFFSET(timing_event, t_end), H5T_NATIVE_DOUBLE));
    H5Tclose(ph);
    return t;
}

int h5_exists(hid_t loc, const char *path) {
    /* H5Lexists fails (rather than answering 0) when an intermediate group is missing, so walk
     * the path one component at a time. */
    char prefix[1024];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof prefix) return 0;
    int found = 1;
    H5E_BEGIN_TRY {
        for (size_t i = 0; i <= len && found; i++) {
            if (path[i] != '/' && path[i] != '\0') continue;
            if (i == 0) continue;
            memcpy(prefix, path, i);
            prefix[i] = '\0';
            if (H5Lexists(loc, prefix, H5P_DEFAULT) <= 0) found = 0;
        }
    } H5E_END_TRY;
    return found;
}

H5I_type_t h5_object_type(hid_t loc, const char *path) {
    if (!h5_exists(loc, path)) return H5I_BADID;
    H5I_type_t type = H5I_BADID;
    H5E_BEGIN_TRY {
        hid_t obj = H5Oopen(loc, path, H5P_DEFAULT);
        if (obj >= 0) {
            type = H5Iget_type(obj);
            H5Oclose(obj);
        }
    } H5E_END_TRY;
    return type;
}

int h5_attr_exists(hid_t obj, const char *name) {
    htri_t found;
    H5E_BEGIN_TRY { found = H5Aexists(obj, name); } H5E_END_TRY;
    return found > 0;
}

hid_t h5_group_open_or_create(hid_t loc, const char *path) {
    hid_t g;
    if (h5_exists(loc, path)) {
        g = H5Gopen2(loc, path, H5P_DEFAULT);
    } else {
        hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
        H5_CHECK(lcpl);
        H5_CHECK(H5Pset_create_intermediate_group(lcpl, 1));
        g = H5Gcreate2(loc, path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        H5Pclose(lcpl);
    }
    H5_CHECK(g);
    return g;
}

/* Opens the attribute for overwrite, recreating it when its type or shape differ. */
static hid_t attr_open_fresh(hid_t obj, const char *name, hid_t type, hid_t space) {
    if (H5Aexists(obj, name) > 0) H5_CHECK(H5Adelete(obj, name));
    hid_t attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(attr);
    return attr;
}

/* Writes data of type over space as attribute name (created or overwritten); closes space. */
static void attr_write(hid_t obj, const char *name, hid_t type, hid_t space, const void *data) {
    H5_CHECK(space);
    hid_t attr = attr_open_fresh(obj, name, type, space);
    H5_CHECK(H5Awrite(attr, type, data));
    H5Aclose(attr);
    H5Sclose(space);
}

static hid_t space_1d(long n) {
    hsize_t dims[1] = {(hsize_t)n};
    return H5Screate_simple(1, dims, NULL);
}

void h5_attr_write_string(hid_t obj, const char *name, const char *value) {
    if (!value) value = "";
    hid_t type = h5_string_type(strlen(value) + 1);
    attr_write(obj, name, type, H5Screate(H5S_SCALAR), value);
    H5Tclose(type);
}

void h5_attr_write_strings(hid_t obj, const char *name, const char *const *values, int n,
                           size_t width) {
    char *packed = xcalloc((unsigned long)(n > 0 ? n : 1), width);
    for (int i = 0; i < n; i++) strncpy(packed + (size_t)i * width, values[i], width - 1);
    hid_t type = h5_string_type(width);
    attr_write(obj, name, type, space_1d(n), packed);
    H5Tclose(type);
    free(packed);
}

void h5_attr_write_int(hid_t obj, const char *name, long long value) {
    attr_write(obj, name, H5T_NATIVE_LLONG, H5Screate(H5S_SCALAR), &value);
}

void h5_attr_write_double(hid_t obj, const char *name, double value) {
    attr_write(obj, name, H5T_NATIVE_DOUBLE, H5Screate(H5S_SCALAR), &value);
}

void h5_attr_write_doubles(hid_t obj, const char *name, const double *values, long n) {
    attr_write(obj, name, H5T_NATIVE_DOUBLE, space_1d(n), values);
}

void h5_attr_write_longs(hid_t obj, const char *name, const long long *values, long n) {
    attr_write(obj, name, H5T_NATIVE_LLONG, space_1d(n), values);
}

/* Opens an attribute for reading, or -1 without printing an HDF5 error. */
static hid_t attr_open_quiet(hid_t obj, const char *name) {
    hid_t attr = -1;
    H5E_BEGIN_TRY {
        if (H5Aexists(obj, name) > 0) attr = H5Aopen(obj, name, H5P_DEFAULT);
    } H5E_END_TRY;
    return attr;
}

/* Reads one string of any length from an attribute (is_attr) or a dataset, without printing
 * HDF5 errors: a variable-length one (as h5py writes str) through a C string, a fixed-length
 * one as a NUL-terminated string one byte longer in the file's character set (so HDF5 does
 * not refuse UTF-8, and drops space padding). NULL when it is not one string or unreadable. */
static char *string_read(hid_t obj, int is_attr) {
    hid_t ftype = is_attr ? H5Aget_type(obj) : H5Dget_type(obj);
    hid_t space = is_attr ? H5Aget_space(obj) : H5Dget_space(obj);
    char *out = NULL;
    if (H5Tget_class(ftype) == H5T_STRING && H5Sget_simple_extent_npoints(space) == 1) {
        int variable = H5Tis_variable_str(ftype) > 0;
        size_t size = variable ? 0 : H5Tget_size(ftype);
        hid_t mtype = H5Tcopy(variable ? H5T_C_S1 : ftype);
        H5_CHECK(H5Tset_size(mtype, variable ? H5T_VARIABLE : size + 1));
        /* HDF5 converts no string between character sets, and h5py writes str as UTF-8 */
        if (variable) H5_CHECK(H5Tset_cset(mtype, H5Tget_cset(ftype)));
        if (!variable) H5_CHECK(H5Tset_strpad(mtype, H5T_STR_NULLTERM));
        char *vl = NULL;
        if (!variable) out = xcalloc(size + 2, 1);
        void *buf = variable ? (void *)&vl : (void *)out;
        herr_t err;
        H5E_BEGIN_TRY {
            err = is_attr ? H5Aread(obj, mtype, buf)
                          : H5Dread(obj, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        } H5E_END_TRY;
        if (variable && err >= 0 && vl) {
            out = strdup(vl);
            H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, &vl);
        }
        if (!variable && err < 0) {
            free(out);
            out = NULL;
        }
        H5Tclose(mtype);
    }
    H5Sclose(space);
    H5Tclose(ftype);
    return out;
}

char *h5_attr_read_string_alloc(hid_t obj, const char *name) {
    hid_t attr = attr_open_quiet(obj, name);
    if (attr < 0) return NULL;
    char *out = string_read(attr, 1);
    H5Aclose(attr);
    return out;
}

char *h5_dataset_read_string(hid_t loc, const char *path) {
    hid_t dset;
    H5E_BEGIN_TRY { dset = H5Dopen2(loc, path, H5P_DEFAULT); } H5E_END_TRY;
    if (dset < 0) return NULL;
    char *out = string_read(dset, 0);
    H5Dclose(dset);
    return out;
}

int h5_attr_read_string(hid_t obj, const char *name, char *out, size_t len) {
    char *s = h5_attr_read_string_alloc(obj, name);
    if (!s) return -1;
    strncpy(out, s, len - 1);
    out[len - 1] = '\0';
    free(s);
    return 0;
}

static int attr_read_number(hid_t obj, const char *name, hid_t mtype, void *out) {
    hid_t attr = attr_open_quiet(obj, name);
    if (attr < 0) return -1;
    int rc = -1;
    hid_t ftype = H5Aget_type(attr);
    hid_t space = H5Aget_space(attr);
    H5T_class_t cls = H5Tget_class(ftype);
    if ((cls == H5T_INTEGER || cls == H5T_FLOAT) && H5Sget_simple_extent_npoints(space) == 1) {
        herr_t err;
        H5E_BEGIN_TRY { err = H5Aread(attr, mtype, out); } H5E_END_TRY;
        rc = err < 0 ? -1 : 0;
    }
    H5Sclose(space);
    H5Tclose(ftype);
    H5Aclose(attr);
    return rc;
}

int h5_attr_read_long(hid_t obj, const char *name, long long *out) {
    return attr_read_number(obj, name, H5T_NATIVE_LLONG, out);
}

int h5_attr_read_double(hid_t obj, const char *name, double *out) {
    return attr_read_number(obj, name, H5T_NATIVE_DOUBLE, out);
}

double *h5_attr_read_doubles(hid_t obj, const char *name, long *n) {
    *n = 0;
    hid_t attr = attr_open_quiet(obj, name);
    if (attr < 0) return NULL;
    hid_t space = H5Aget_space(attr);
    hssize_t count = H5Sget_simple_extent_npoints(space);
    double *out = NULL;
    if (count >= 0) {
        out = xcalloc((unsigned long)(count ? count : 1), sizeof(double));
        herr_t err;
        H5E_BEGIN_TRY { err = H5Aread(attr, H5T_NATIVE_DOUBLE, out); } H5E_END_TRY;
        if (err < 0) {
            free(out);
            out = NULL;
        } else {
            *n = (long)count;
        }
    }
    H5Sclose(space);
    H5Aclose(attr);
    return out;
}

int h5_file_has_signature(const char *path) {
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    /* the superblock sits at 0 or, after a user block, at 512, 1024, 2048, ... */
    int found = 0;
    for (long at = 0; !found && at >= 0 && at < (1L << 30); at = at ? 2 * at : 512) {
        unsigned char head[8];
        if (fseek(f, at, SEEK_SET) != 0 || fread(head, 1, sizeof head, f) != sizeof head) break;
        found = memcmp(head, sig, sizeof sig) == 0;
    }
    fclose(f);
    return found;
}

hid_t h5_open_read(const char *path) {
    /* what is wrong with the path is said before HDF5 is asked: its one failure reads the
     * same for a missing file, a JSON file and a damaged HDF5 file */
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            error_set("%s: no such file", path);
        else
            error_set("%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        error_set("%s: not a regular file (%s)", path,
                  S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket");
        return -1;
    }
    hid_t file;
    H5E_BEGIN_TRY { file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT); } H5E_END_TRY;
    if (file >= 0) return file;
    if (h5_file_has_signature(path)) /* HDF5 refuses a file shorter than its superblock says */
        error_set("%s: HDF5 cannot open it (truncated or damaged HDF5 file?)", path);
    else
        error_set("%s: not an HDF5 file (no HDF5 signature)", path);
    return -1;
}

void *h5_dataset_read_all(hid_t file, const char *path, hid_t type, int *ndims, hsize_t dims[8],
                          long *count) {
    if (!h5_exists(file, path)) return NULL;
    hid_t d;
    H5E_BEGIN_TRY { d = H5Dopen2(file, path, H5P_DEFAULT); } H5E_END_TRY;
    if (d < 0) return NULL;
    hid_t space = H5Dget_space(d);
    *ndims = H5Sget_simple_extent_ndims(space);
    void *buf = NULL;
    if (*ndims >= 0 && *ndims <= 8) {
        H5Sget_simple_extent_dims(space, dims, NULL);
        long n = (long)H5Sget_simple_extent_npoints(space);
        if (count) *count = n;
        buf = xmalloc((unsigned long)(n ? n : 1) * H5Tget_size(type));
        herr_t err;
        H5E_BEGIN_TRY { err = H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); } H5E_END_TRY;
        if (err < 0) {
            free(buf);
            buf = NULL;
        }
    }
    H5Sclose(space);
    H5Dclose(d);
    return buf;
}
