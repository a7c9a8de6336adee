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

/* Swaps two paths' names in one step (Linux's renameat2 with RENAME_EXCHANGE, relative to the working
   directory), for replacing a store's directory by its compacted copy (`Environment.exchangeDirectories`):
   declared here for the same reason as sync_file_range. Elsewhere -1 (the caller reports it). */
#ifdef __linux__
extern int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
static inline int clmdb_exchange_paths(const char *a, const char *b) {
    return renameat2(-100, a, -100, b, 2u); /* AT_FDCWD, RENAME_EXCHANGE */
}
#else
static inline int clmdb_exchange_paths(const char *a, const char *b) {
    (void)a; (void)b;
    return -1;
}
#endif
#endif
