/* Removal of a test's temporary directory with everything the test left in it. */
#ifndef CLINFER_TEST_TEMP_TREE_H
#define CLINFER_TEST_TEMP_TREE_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

static void remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        for (struct dirent *e; (e = readdir(d)) != NULL;) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char child[1024];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            remove_tree(child);
        }
        closedir(d);
    }
    remove(path);
}

#endif
