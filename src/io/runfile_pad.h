/* A partial run file left mid-flush stays readable. HDF5 writes the superblock, with the end of
 * file it addresses, during a collective flush whose raw data other ranks have still to write;
 * a rank that leaves at that moment (record.stop_grace_seconds, the stall watchdog) leaves a
 * file shorter than its stored end, which HDF5 refuses to open ("truncated file"). At that exit
 * the rank extends the file to the stored end: the rows never written read as zeros, and every
 * row a completed flush counted is there. docs/schema.md ("Partial files"). */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* Names the partial file the exit paths pad (a copy; one run file per process at a time). */
void runfile_pad_arm(const char *partial);

/* The file is whole or gone (closed, renamed): nothing to pad. */
void runfile_pad_disarm(void);

/* Async-signal-safe: open, read, fstat, ftruncate, close; never shrinks the file, never writes
 * a byte HDF5 addresses. Called from the stop-grace SIGALRM handler and the watchdog's stall
 * hook just before _exit. Does nothing when disarmed or when the superblock is not one this
 * build writes (versions 2 and 3, 8-byte addresses). */
void runfile_pad_on_exit(void);

#ifdef __cplusplus
}
#endif
