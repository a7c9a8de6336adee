#ifndef CLMDB_SHIM_H
#define CLMDB_SHIM_H
#include <lmdb.h>

/* Starts the writeback of a data file's dirty pages in [offset, offset + length) and waits for it, for the
   environment's paced flush (`Environment.flushDataFile`): Linux's sync_file_range, declared here because
   glibc declares it only under _GNU_SOURCE, which this module does not define. Elsewhere -1: the caller's
   fdatasync then writes everything at once. */
#ifdef __linux__
extern int sync_file_range(int fd, long long offset, long long nbytes, unsigned int flags);
static inline int clmdb_write_range(int fd, long long offset, long long length) {
    return sync_file_range(fd, offset, length, 1u | 2u | 4u); /* WAIT_BEFORE | WRITE | WAIT_AFTER */
}
#else
static inline int clmdb_write_range(int fd, long long offset, long long length) {
    (void)fd; (void)offset; (void)length;
    return -1;
}
#endif
#endif
