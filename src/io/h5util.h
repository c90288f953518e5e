/* Small HDF5 helpers shared by the run file writer and the tools that read run files:
 * string types, attributes written identically by every rank, and checked serial reads. */
#pragma once
#include <hdf5.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A fixed-length, NUL-terminated C string type of size bytes (caller closes it). */
hid_t h5_string_type(size_t size);

/* The HDF5 enum of phase names (values = enum phase) and the in-memory compound type of a
 * timing_event (timing.h). Reading with these converts by enum name, so stored values may
 * differ from this build's as long as the names match. Caller closes. */
hid_t h5_phase_enum_type(void);
hid_t h5_timing_event_type(void);

/* Opens the group at path under loc, creating it when absent (collective in parallel mode). */
hid_t h5_group_open_or_create(hid_t loc, const char *path);

/* Attribute writers: create or overwrite. In parallel mode every rank calls them with the same
 * value (HDF5 requires identical metadata on every rank). */
void h5_attr_write_string(hid_t obj, const char *name, const char *value);
void h5_attr_write_strings(hid_t obj, const char *name, const char *const *values, int n,
                           size_t width);
void h5_attr_write_int(hid_t obj, const char *name, long long value);
void h5_attr_write_double(hid_t obj, const char *name, double value);
void h5_attr_write_doubles(hid_t obj, const char *name, const double *values, long n);
void h5_attr_write_longs(hid_t obj, const char *name, const long long *values, long n);

/* Attribute readers for the tools and the checkpoint reader. Return 0 on success, -1 when absent
 * or of the wrong kind (no HDF5 error is printed). The string readers take fixed-length and
 * variable-length strings (h5py writes str as variable-length UTF-8) alike, in either
 * character set. read_string copies at most len-1 bytes. */
int h5_attr_read_string(hid_t obj, const char *name, char *out, size_t len);
/* Returns a malloc'ed copy of a string attribute of any length, fixed-length or
 * variable-length (as h5py writes str), or NULL. */
char *h5_attr_read_string_alloc(hid_t obj, const char *name);
int h5_attr_read_long(hid_t obj, const char *name, long long *out);
int h5_attr_read_double(hid_t obj, const char *name, double *out);
/* Reads a 1-D double attribute into a malloc'ed array; *n gets its length. NULL when absent. */
double *h5_attr_read_doubles(hid_t obj, const char *name, long *n);

/* Whether a link path exists under loc (every intermediate group checked; no error printed). */
int h5_exists(hid_t loc, const char *path);

/* What the object at path under loc is: H5I_GROUP, H5I_DATASET (or another H5I_ kind), or
 * H5I_BADID when it is absent or cannot be opened (a dangling link). No error printed. */
H5I_type_t h5_object_type(hid_t loc, const char *path);

/* Whether obj has an attribute name, of any type (no error printed). */
int h5_attr_exists(hid_t obj, const char *name);

/* Reads a whole dataset (up to 8 dims) as mem_type into a new malloc'ed buffer; *ndims and dims
 * get its shape and *count (may be NULL) its elements. NULL when absent or unreadable; no HDF5
 * error is printed. For the serial tools (report, diff). */
void *h5_dataset_read_all(hid_t file, const char *path, hid_t mem_type, int *ndims,
                          hsize_t dims[8], long *count);

/* Returns a malloc'ed copy of a scalar string dataset, read as h5_attr_read_string_alloc reads
 * attributes, or NULL when it is absent or not one string. */
char *h5_dataset_read_string(hid_t loc, const char *path);

/* Opens a file read-only with the serial (sec2) driver; returns -1 with error_message() set
 * to "PATH: no such file", "PATH: not a regular file (...)", "PATH: not an HDF5 file (...)"
 * or, for a file with HDF5's signature that HDF5 cannot open, "truncated or damaged". */
hid_t h5_open_read(const char *path);

/* 1 when the file holds HDF5's superblock signature at offset 0 or at a user block's end
 * (512, 1024, 2048, ...): a file HDF5 then refuses is damaged, not foreign. */
int h5_file_has_signature(const char *path);

#ifdef __cplusplus
}
#endif
