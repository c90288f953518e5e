/* Extending a partial run file to the end of file its superblock stores (runfile_pad.h).
 *
 * HDF5 itself cannot be called here: the caller is a signal handler or a watchdog thread that
 * runs while the main thread may be inside the library. So the one number needed is read from
 * the superblock's fixed layout, as the HDF5 File Format Specification (section II.A, versions 2
 * and 3) gives it:
 *   0  signature "\211HDF\r\n\032\n"     8  version        9  size of offsets
 *   10 size of lengths   11 flags        12 base address, then the superblock extension
 *   address, the end-of-file address and the root object header address, each "size of
 *   offsets" bytes, little-endian; a checksum last.
 * Run files are created with the 1.8 format at the least (runfile.c: run_file_plists), so their
 * superblock is version 2 or 3; anything else is left alone. */
#include "io/runfile_pad.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char pad_path[4096];
static volatile sig_atomic_t pad_armed;

void runfile_pad_arm(const char *partial) {
    pad_armed = 0;
    if (!partial || strlen(partial) >= sizeof pad_path) return; /* then never padded */
    snprintf(pad_path, sizeof pad_path, "%s", partial);
    pad_armed = 1;
}

void runfile_pad_disarm(void) { pad_armed = 0; }

enum { SB_OFFSETS = 8, SB_EOF_AT = 12 + 2 * SB_OFFSETS, SB_READ = SB_EOF_AT + SB_OFFSETS };

/* The stored end of file (base address plus the end-of-file address), or 0 when the bytes are
 * not a version 2/3 superblock with 8-byte addresses. */
static uint64_t stored_eof(const unsigned char *sb) {
    static const unsigned char signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (memcmp(sb, signature, sizeof signature) != 0) return 0;
    if ((sb[8] != 2 && sb[8] != 3) || sb[9] != SB_OFFSETS) return 0;
    uint64_t base = 0, eof = 0;
    for (int i = SB_OFFSETS - 1; i >= 0; i--) {
        base = base << 8 | sb[12 + i];
        eof = eof << 8 | sb[SB_EOF_AT + i];
    }
    if (eof == UINT64_MAX || base > UINT64_MAX - eof) return 0; /* undefined, or nonsense */
    return base + eof;
}

void runfile_pad_on_exit(void) {
    if (!pad_armed) return;
    int fd = open(pad_path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    unsigned char sb[SB_READ];
    size_t got = 0;
    while (got < sizeof sb) { /* read(2): pread is not on POSIX's async-signal-safe list */
        ssize_t n = read(fd, sb + got, sizeof sb - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    struct stat st;
    const uint64_t end = got == sizeof sb ? stored_eof(sb) : 0;
    if (end && fstat(fd, &st) == 0 && (uint64_t)st.st_size < end && end <= (uint64_t)INT64_MAX)
        if (ftruncate(fd, (off_t)end) != 0) { /* nothing better to do on the way out */
        }
    close(fd);
}
