/* The on-disk caches' directories and files (cache_dir.c); errors are errno values. */
#ifndef CLINFER_OPENCL_CACHE_DIR_H
#define CLINFER_OPENCL_CACHE_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The cache directory: given, else CLINFER_CACHE_DIR, else $XDG_CACHE_HOME/clinfer, else
 * ~/.cache/clinfer (false when none fits in size); and mkdir -p, 0 or an errno value. */
bool cl_cache_dir(const char *given, char *dir, size_t size);
int cl_make_dirs(const char *dir);

/* Makes room for bytes more among the weight cache files (weights-*.clw) in dir, the oldest used
 * evicted first; false where they cannot fit under max bytes and the file count, or on the disk. */
bool cl_cache_make_room(const char *dir, uint64_t bytes, uint64_t max);

/* write(2) of all bytes, past short writes and EINTR; 0 or an errno value. */
int cl_write_all(int fd, const void *data, size_t bytes);

#endif
