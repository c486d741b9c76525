/* clinfer devices: every OpenCL device, what it can do, the kernel path clinfer picks for it,
 * and which one runs by default (and why). */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "clinfer.h"

static const char *type_name(clinfer_device_type type) {
    switch (type) {
    case CLINFER_DEVICE_CPU:
        return "cpu";
    case CLINFER_DEVICE_GPU:
        return "gpu";
    case CLINFER_DEVICE_ACCELERATOR:
        return "accelerator";
    default:
        return "other";
    }
}

static const char *vendor_name(clinfer_vendor vendor) {
    static const char *const names[] = {"other", "nvidia", "amd",      "intel",
                                        "apple", "arm",    "qualcomm", "pocl"};
    return (size_t)vendor < sizeof names / sizeof names[0] ? names[vendor] : "other";
}

/* "3.7 GiB", "512 MiB" */
static const char *human_bytes(uint64_t bytes, char *buf, size_t size) {
    if (bytes >= (1ull << 30))
        snprintf(buf, size, "%.1f GiB", (double)bytes / (1ull << 30));
    else
        snprintf(buf, size, "%llu MiB", (unsigned long long)(bytes >> 20));
    return buf;
}

static void print_table(const clinfer_device_info *infos, size_t count, size_t chosen,
                        const char *reason) {
    printf("  # %-28s %-30s %-5s %10s %10s %4s %-12s %-4s %s\n", "platform", "device", "type",
           "memory", "max alloc", "CUs", "OpenCL C", "fp16", "kernel path");
    for (size_t i = 0; i < count; i++) {
        const clinfer_device_info *d = &infos[i];
        char mem[32], alloc[32];
        /* "OpenCL C 1.2 PoCL" -> "1.2 PoCL": the header already says OpenCL C. */
        const char *c_version = d->opencl_c_version;
        if (!strncmp(c_version, "OpenCL C ", 9)) c_version += 9;
        printf("%c%2zu %-28.28s %-30.30s %-5s %10s %10s %4u %-12.12s %-4s %s\n",
               i == chosen ? '*' : ' ', i, d->platform, d->name, type_name(d->type),
               human_bytes(d->global_mem, mem, sizeof mem),
               human_bytes(d->max_alloc, alloc, sizeof alloc), d->compute_units, c_version,
               d->fp16 ? "yes" : "no", d->kernel_path);
    }
    printf("\n* default: %s\n", reason);
}

static int print_json(const clinfer_device_info *infos, size_t count, size_t chosen,
                      const char *reason) {
    cJSON *root = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(root, "devices");
    if (chosen < count)
        cJSON_AddNumberToObject(root, "default", (double)chosen);
    else
        cJSON_AddNullToObject(root, "default");
    cJSON_AddStringToObject(root, "reason", reason);
    for (size_t i = 0; list && i < count; i++) {
        const clinfer_device_info *d = &infos[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        cJSON_AddNumberToObject(o, "index", (double)i);
        cJSON_AddBoolToObject(o, "default", i == chosen);
        cJSON_AddStringToObject(o, "platform", d->platform);
        cJSON_AddStringToObject(o, "platform_version", d->platform_version);
        cJSON_AddStringToObject(o, "name", d->name);
        cJSON_AddStringToObject(o, "vendor", vendor_name(d->vendor));
        cJSON_AddStringToObject(o, "vendor_name", d->vendor_name);
        cJSON_AddStringToObject(o, "type", type_name(d->type));
        cJSON_AddStringToObject(o, "driver_version", d->driver_version);
        cJSON_AddStringToObject(o, "device_version", d->device_version);
        cJSON_AddStringToObject(o, "opencl_c_version", d->opencl_c_version);
        cJSON_AddNumberToObject(o, "compute_units", d->compute_units);
        cJSON_AddNumberToObject(o, "clock_mhz", d->clock_mhz);
        cJSON_AddNumberToObject(o, "global_mem", (double)d->global_mem);
        cJSON_AddNumberToObject(o, "local_mem", (double)d->local_mem);
        cJSON_AddNumberToObject(o, "max_alloc", (double)d->max_alloc);
        cJSON_AddNumberToObject(o, "max_work_group_size", (double)d->max_work_group_size);
        cJSON_AddNumberToObject(o, "preferred_vector_width_float", d->preferred_vector_width_float);
        cJSON_AddNumberToObject(o, "preferred_vector_width_half", d->preferred_vector_width_half);
        cJSON_AddBoolToObject(o, "fp16", d->fp16);
        cJSON_AddBoolToObject(o, "fp64", d->fp64);
        cJSON_AddBoolToObject(o, "subgroups", d->subgroups);
        cJSON_AddBoolToObject(o, "int_dot", d->int_dot);
        cJSON_AddStringToObject(o, "kernel_path", d->kernel_path);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return cli_error("devices: out of memory writing JSON");
    puts(text);
    cJSON_free(text);
    return 0;
}

int cmd_devices(int argc, char **argv) {
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (opt == 'j') {
            json = true;
        } else if (opt == 'h') {
            printf("usage: clinfer devices [--json]\n\n"
                   "Lists every OpenCL device of every platform, the kernel path clinfer uses on\n"
                   "it, and marks with * the device chosen by default ($CLINFER_DEVICE, else the\n"
                   "strongest: GPUs first, then compute units x clock).\n\n"
                   "      --json   machine-readable output\n"
                   "  -h, --help   this help\n");
            return 0;
        } else {
            return cli_bad_option("devices", opt, argv);
        }
    }
    if (optind < argc) return cli_error("devices: unexpected argument '%s'", argv[optind]);

    size_t count = 0, chosen = 0;
    clinfer_status st = clinfer_device_count(&count);
    if (st != CLINFER_OK || count == 0) return cli_error("%s", clinfer_last_error());
    clinfer_device_info *infos = calloc(count, sizeof *infos);
    if (!infos) return cli_error("devices: out of memory");
    for (size_t i = 0; st == CLINFER_OK && i < count; i++)
        st = clinfer_device_get_info(i, &infos[i]);
    char reason[384] = "";
    if (st == CLINFER_OK && clinfer_device_select(NULL, &chosen, reason, sizeof reason)) {
        /* A bad CLINFER_DEVICE still lists the devices, so the user can pick a valid one. */
        chosen = count;
        snprintf(reason, sizeof reason, "none (%s)", clinfer_last_error());
    }
    int rc = 1;
    if (st != CLINFER_OK)
        cli_error("devices: %s", clinfer_last_error());
    else if (json)
        rc = print_json(infos, count, chosen, reason);
    else {
        print_table(infos, count, chosen, reason);
        rc = 0;
    }
    free(infos);
    return rc;
}
