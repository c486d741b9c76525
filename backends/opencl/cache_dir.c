/* The directories and files of the on-disk caches (kernel binaries: program.c; laid-out
 * weights: weight_cache_cl.c): where they live, making them, writing a file whole, and room for
 * a new weight cache file among the old ones. */
#include "cache_dir.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "log.h"
#include "options.h"

#define FREE_MARGIN ((uint64_t)1 << 30) /* disk space a write leaves free, at least */
#define MAX_FILES 64 /* files kept; a test suite's many small models would pile up otherwise */

bool cl_cache_dir(const char *given, char *dir, size_t size) {
    const char *env = given && *given ? given : options_cache_dir();
    int n = -1;
    if (env)
        n = snprintf(dir, size, "%s", env);
    else if ((env = getenv("XDG_CACHE_HOME")) && *env)
        n = snprintf(dir, size, "%s/clinfer", env);
    else if ((env = getenv("HOME")) && *env)
        n = snprintf(dir, size, "%s/.cache/clinfer", env);
    return n > 0 && (size_t)n < size;
}

int cl_make_dirs(const char *dir) {
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return ENAMETOOLONG;
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return errno;
        *p = c;
        if (c == '\0') break;
    }
    struct stat s;
    if (stat(dir, &s) != 0) return errno;
    return S_ISDIR(s.st_mode) ? 0 : ENOTDIR;
}

bool cl_cache_make_room(const char *dir, uint64_t bytes, uint64_t max) {
    struct statvfs vfs;
    if (bytes > max ||
        (statvfs(dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize < bytes + FREE_MARGIN))
        return false;
    for (;;) {
        DIR *d = opendir(dir);
        if (!d) return false;
        uint64_t total = bytes;
        int files = 1;
        char oldest[PATH_MAX] = "";
        struct timespec when = {0, 0};
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            size_t len = strlen(e->d_name);
            char path[PATH_MAX];
            struct stat sb;
            if (strncmp(e->d_name, "weights-", 8) || len < 12 ||
                strcmp(e->d_name + len - 4, ".clw"))
                continue;
            if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
                stat(path, &sb) != 0)
                continue;
            total += (uint64_t)sb.st_size;
            files++;
            if (!oldest[0] || sb.st_mtim.tv_sec < when.tv_sec ||
                (sb.st_mtim.tv_sec == when.tv_sec && sb.st_mtim.tv_nsec < when.tv_nsec)) {
                snprintf(oldest, sizeof oldest, "%s", path);
                when = sb.st_mtim;
            }
        }
        closedir(d);
        if (total <= max && files <= MAX_FILES) return true;
        if (!oldest[0] || unlink(oldest) != 0) return false;
        log_msg(CLINFER_LOG_DEBUG, "weight cache: evicted %s (past %llu MiB or %d files)", oldest,
                (unsigned long long)(max >> 20), MAX_FILES);
    }
}

int cl_write_all(int fd, const void *data, size_t bytes) {
    const uint8_t *p = data;
    while (bytes > 0) {
        ssize_t n = write(fd, p, bytes > (1u << 30) ? (1u << 30) : bytes);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno : EIO;
        p += n;
        bytes -= (size_t)n;
    }
    return 0;
}
