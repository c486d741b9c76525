/* The device loop of the OpenCL tests: CLINFER_TEST_DEVICES="0,2" limits a run to those device
 * indices (unset or empty: every device). */
#ifndef CLINFER_TEST_CL_DEVICES_H
#define CLINFER_TEST_CL_DEVICES_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "clinfer.h"

static inline bool test_device_picked(size_t index) {
    const char *pick = getenv("CLINFER_TEST_DEVICES");
    if (!pick || !*pick) return true;
    for (const char *p = pick; *p;) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end != p && v == index) return true;
        p = *end ? end + 1 : end;
    }
    return false;
}

/* CLINFER_KERNEL_PATH, the kernel path the backend is forced onto, for messages. */
static inline const char *test_kernel_path(void) {
    const char *path = getenv("CLINFER_KERNEL_PATH");
    return path ? path : "default";
}

/* CLINFER_TEST_SMALL=1: smaller shapes for a simulator such as Oclgrind, which interprets every
 * work-item (thousands of times slower than PoCL); the same kernels and paths are covered. */
static inline bool test_small(void) {
    const char *small = getenv("CLINFER_TEST_SMALL");
    return small && *small && *small != '0';
}

/* Runs test(index) on every picked device. Returns 77 (the test is skipped) when there is no
 * OpenCL device or none is picked, else 0. */
static inline int for_each_test_device(void (*test)(size_t index)) {
    size_t count = 0, tested = 0;
    if (clinfer_device_count(&count) != CLINFER_OK || count == 0) {
        printf("no OpenCL device: %s\n", clinfer_last_error());
        return 77;
    }
    for (size_t d = 0; d < count; d++)
        if (test_device_picked(d)) {
            test(d);
            tested++;
        }
    if (tested == 0) {
        printf("CLINFER_TEST_DEVICES picks none of the %zu devices\n", count);
        return 77;
    }
    return 0;
}

#endif
