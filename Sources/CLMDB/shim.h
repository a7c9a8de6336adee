#ifndef CLMDB_SHIM_H
#define CLMDB_SHIM_H
#include <lmdb.h>

/* glibc's sync_file_range, declared only under _GNU_SOURCE (which this module does not define): the
   environment's paced flush (`Environment.flushDataFile`) writes a data file's dirty pages range by range. */
extern int sync_file_range(int fd, long long offset, long long nbytes, unsigned int flags);

/* Starts the writeback of the dirty pages in [offset, offset + length) and waits for it
   (SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER). */
static inline int clmdb_write_range(int fd, long long offset, long long length) {
    return sync_file_range(fd, offset, length, 1u | 2u | 4u);
}
#endif
