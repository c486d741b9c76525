/* `clinfer devices` through the real binary (argv[1]): without any OpenCL platform it prints the
 * clean message and exits 1; --json lists exactly the devices the library enumerates, with the
 * default the library selects; the table marks that default; --help and bad options behave. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static char dir[] = "/tmp/clinfer-cli-test-XXXXXX";
static char out_path[64], err_path[64];

/* Runs `env clinfer args` with stdout/stderr into files; returns the exit code (-1: crashed). */
static int run(const char *env, const char *cli, const char *args) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "env %s '%s' %s >'%s' 2>'%s'", env, cli, args, out_path, err_path);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The whole file, malloc'ed and NUL-terminated ("" when unreadable). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    char *text = calloc(1, 1 << 20);
    if (f && text) text[fread(text, 1, (1 << 20) - 1, f)] = '\0';
    if (f) fclose(f);
    return text;
}

static void test_no_platform(const char *cli) {
    char empty[128], env[256];
    snprintf(empty, sizeof empty, "%s/no-icd", dir);
    mkdir(empty, 0755);
    /* OCL_ICD_FILENAMES would name drivers past the empty folder (CUDA images set it) */
    snprintf(env, sizeof env, "-u OCL_ICD_FILENAMES OCL_ICD_VENDORS='%s'", empty);
    int rc = run(env, cli, "devices");
    char *err = slurp(err_path);
    EXPECT(rc == 1, "exit code %d", rc);
    EXPECT(strstr(err, "no OpenCL platform found (install an OpenCL driver; for CPUs: "
                       "pocl-opencl-icd)") != NULL,
           "stderr: %s", err);
    free(err);
    rc = run(env, cli, "devices --json");
    EXPECT(rc == 1, "--json exit code %d", rc);
}

static void test_listing(const char *cli, size_t count) {
    size_t chosen = 0;
    EXPECT_OK(clinfer_device_select(NULL, &chosen, NULL, 0));
    int rc = run("-u CLINFER_DEVICE", cli, "devices --json");
    EXPECT(rc == 0, "--json exit code %d", rc);
    char *text = slurp(out_path);
    cJSON *root = cJSON_Parse(text);
    EXPECT(root != NULL, "not JSON: %s", text);
    cJSON *list = cJSON_GetObjectItem(root, "devices");
    EXPECT(cJSON_GetArraySize(list) == (int)count, "%d devices listed, library has %zu",
           cJSON_GetArraySize(list), count);
    cJSON *def = cJSON_GetObjectItem(root, "default");
    EXPECT(cJSON_IsNumber(def) && (size_t)def->valuedouble == chosen, "default");
    for (int i = 0; i < cJSON_GetArraySize(list); i++) {
        cJSON *d = cJSON_GetArrayItem(list, i);
        clinfer_device_info info;
        EXPECT_OK(clinfer_device_get_info((size_t)i, &info));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(d, "name"));
        const char *path = cJSON_GetStringValue(cJSON_GetObjectItem(d, "kernel_path"));
        cJSON *mem = cJSON_GetObjectItem(d, "global_mem");
        EXPECT(name && !strcmp(name, info.name), "name %s vs %s", name, info.name);
        EXPECT(path && !strcmp(path, info.kernel_path), "path %s", path);
        /* A CPU device's memory is the host's RAM, which a VM can grow between two processes
         * (PoCL on a GPU machine went from 3.4 to 7.6 GiB within a minute): nonzero there. */
        EXPECT(cJSON_IsNumber(mem) && (info.type == CLINFER_DEVICE_CPU
                                           ? mem->valuedouble > 0 && info.global_mem > 0
                                           : (uint64_t)mem->valuedouble == info.global_mem),
               "memory %.0f vs %llu", cJSON_IsNumber(mem) ? mem->valuedouble : -1.0,
               (unsigned long long)info.global_mem);
        EXPECT(cJSON_IsBool(cJSON_GetObjectItem(d, "fp16")), "fp16 flag");
    }
    cJSON_Delete(root);
    free(text);

    rc = run("-u CLINFER_DEVICE", cli, "devices");
    text = slurp(out_path);
    char marked[16];
    snprintf(marked, sizeof marked, "\n*%2zu ", chosen);
    EXPECT(rc == 0 && strstr(text, "kernel path") && strstr(text, marked) &&
               strstr(text, "* default: device"),
           "table (rc %d):\n%s", rc, text);
    free(text);

    /* A bad CLINFER_DEVICE still lists the devices and says why none is the default. */
    rc = run("CLINFER_DEVICE=no-such-device-xyz", cli, "devices");
    text = slurp(out_path);
    EXPECT(rc == 0 && strstr(text, "default: none") && strstr(text, "no-such-device-xyz"),
           "bad CLINFER_DEVICE (rc %d):\n%s", rc, text);
    free(text);
}

static void test_options(const char *cli) {
    EXPECT(run("", cli, "devices --help") == 0, "--help");
    char *text = slurp(out_path);
    EXPECT(strstr(text, "--json") != NULL, "help text: %s", text);
    free(text);
    EXPECT(run("", cli, "devices --bogus") == 1, "unknown option");
    text = slurp(err_path);
    EXPECT(strstr(text, "--bogus") != NULL, "names the option: %s", text);
    free(text);
}

int main(int argc, char **argv) {
    if (argc < 2 || !mkdtemp(dir)) {
        fprintf(stderr, "usage: test_cli_devices PATH_TO_CLINFER\n");
        return 1;
    }
    snprintf(out_path, sizeof out_path, "%s/out", dir);
    snprintf(err_path, sizeof err_path, "%s/err", dir);
    test_no_platform(argv[1]);
    test_options(argv[1]);
    size_t count = 0;
    EXPECT_OK(clinfer_device_count(&count));
    check_icd_env_restore(); /* the CLI runs see the drivers this process saw */
    if (count > 0)
        test_listing(argv[1], count);
    else
        fprintf(stderr, "no OpenCL device here: listing checks skipped\n");
    char cleanup[128];
    snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", dir);
    EXPECT(system(cleanup) == 0, "cleanup");
    return finish("test_cli_devices");
}
