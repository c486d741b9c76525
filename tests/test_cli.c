/* The clinfer binary. Bad input (missing file, not a GGUF file, unknown flag, bad numbers,
 * unknown device) exits 1 with exactly one line on stderr. With a tiny generated model on the
 * reference backend: run is reproducible for a seed, info describes the model, and --chat on
 * a model without a template says how to name one. verify prints its table and exits 0, and
 * where there is an OpenCL device exits 1 naming the op whose output a fault corrupted.
 * argv[1] is the binary. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "temp_tree.h"
#include "tiny_model.h"

static const char *binary;
static char dir[] = "/tmp/clinfer-test-cli-XXXXXX";

static void slurp(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

static char out[32768];                      /* the last run's stdout */
static const char *stdin_path = "/dev/null"; /* what the next run reads */

/* Runs the binary with args (NULL-terminated), stdin from /dev/null; returns the exit code
 * (-1 if it did not exit normally), stderr's content in err and stdout's in `out`. */
static int run(const char *const *args, char *err, size_t err_size) {
    char err_path[sizeof dir + 16], out_path[sizeof dir + 16];
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    fflush(NULL); /* the child's freopen must not write our buffers twice */
    check_icd_env_restore();
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(stdin_path, "r", stdin) || !freopen(out_path, "w", stdout) ||
            !freopen(err_path, "w", stderr))
            _exit(126);
        const char *argv[32] = {binary};
        for (int i = 0; args[i] && i < 30; i++)
            argv[i + 1] = args[i];
        execv(binary, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
    slurp(err_path, err, err_size);
    slurp(out_path, out, sizeof out);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Expects exit code 1 and a single stderr line that contains needle. */
static void expect_error(const char *needle, const char *const *args) {
    char err[4096];
    int code = run(args, err, sizeof err);
    char cmd[512] = "";
    for (int i = 0; args[i]; i++) {
        strncat(cmd, args[i], sizeof cmd - strlen(cmd) - 2);
        strncat(cmd, " ", sizeof cmd - strlen(cmd) - 1);
    }
    EXPECT(code == 1, "`clinfer %s` exited %d, want 1; stderr: %s", cmd, code, err);
    EXPECT(count_lines(err) == 1, "`clinfer %s` printed %d lines on stderr, want 1: %s", cmd,
           count_lines(err), err);
    EXPECT(strstr(err, needle) != NULL, "`clinfer %s` stderr lacks '%s': %s", cmd, needle, err);
}

#define ERR(needle, ...) expect_error(needle, (const char *const[]){__VA_ARGS__, NULL})

/* The first run on a device with an empty kernel cache says it compiles kernels (unless
 * --quiet); a second run, finding them cached, says nothing of it. */
static void test_first_compile(const char *model) {
    size_t n_devices = 0;
    if (clinfer_device_count(&n_devices) != CLINFER_OK || n_devices == 0) return;
    char err[16384], cache[sizeof dir + 16];
    const char *const gen[] = {"run", "-m", model, "-p", "hi", "-n", "2", NULL};
    const char *const quiet[] = {"run", "-m", model, "-p", "hi", "-n", "2", "-q", NULL};
    for (int q = 0; q < 2; q++) {
        snprintf(cache, sizeof cache, "%s/cache%d", dir, q);
        setenv("CLINFER_CACHE_DIR", cache, 1);
        int code = run(q ? quiet : gen, err, sizeof err);
        EXPECT(code == 0, "run with an empty kernel cache exited %d: %s", code, err);
        const char *said = strstr(err, "compiling OpenCL kernels for");
        EXPECT(q ? !strstr(err, "compiling") : said && !strstr(said + 1, "compiling"),
               "%s run with an empty kernel cache: %s", q ? "a quiet" : "the first", err);
    }
    int code = run(gen, err, sizeof err);
    EXPECT(code == 0 && !strstr(err, "compiling"), "a run with cached kernels: %s", err);
    unsetenv("CLINFER_CACHE_DIR");
    printf("first run: compiling announced once; quiet and cached runs silent\n");
}

/* The flags llama.cpp users type: -c, -s (-1 or absent: a new seed each run, printed), -f,
 * -n -1, -dev, -ctk/-ctv, -ngl (refused with --reference; its splits: tests/test_split_cli.py),
 * bench -o csv; and an empty prompt is an error. */
static void test_llama_flags(const char *model) {
    char err[16384], prompt[sizeof dir + 16];
    snprintf(prompt, sizeof prompt, "%s/prompt.txt", dir);
    FILE *f = fopen(prompt, "w");
    if (f) fputs("hello world", f), fclose(f);
    int code = run((const char *const[]){"run", "-m", model, "--reference", "-f", prompt, "-c",
                                         "64", "-n", "-1", "-s", "-1", NULL},
                   err, sizeof err);
    EXPECT(code == 0, "run -f -c -n -1 -s -1 exited %d: %s", code, err);
    EXPECT(strstr(err, "clinfer: seed "), "no seed line on stderr: %s", err);
    size_t n_devices = 0;
    if (clinfer_device_count(&n_devices) == CLINFER_OK && n_devices > 0) {
        code = run(
            (const char *const[]){"run", "-m", model, "-p", "hi", "-n", "2", "-ngl", "99", NULL},
            err, sizeof err);
        EXPECT(code == 0, "run -ngl 99 exited %d: %s", code, err);
    }
    /* the reference backend runs on the host: an offload request there is a mistake, named */
    ERR("--reference", "run", "-m", model, "--reference", "-p", "hi", "-ngl", "99");
    ERR("--n-gpu-layers", "run", "-m", model, "-p", "hi", "-ngl", "many");
    code = run((const char *const[]){"run", "-m", model, "--reference", "-p", "hi", "-n", "2",
                                     "-ctk", "f32", "-ctv", "f32", NULL},
               err, sizeof err);
    EXPECT(code == 0, "run -ctk f32 -ctv f32 exited %d: %s", code, err);
    ERR("q8_0", "run", "-m", model, "--reference", "-p", "hi", "-ctk", "q8_0", "-ctv", "q8_0");
    ERR("--cache-type-v f32", "run", "-m", model, "--reference", "-p", "hi", "-ctk", "f32");
    ERR("no-such-device", "run", "-m", model, "-p", "hi", "-dev", "no-such-device");
    /* the tiny model's prompts start with BOS: an empty one is BOS alone */
    code = run((const char *const[]){"run", "-m", model, "--reference", "-p", "", "-n", "2", NULL},
               err, sizeof err);
    EXPECT(code == 0, "run -p '' on a model with BOS exited %d: %s", code, err);
    ERR("-s", "run", "-m", model, "--reference", "-p", "hi", "-s", "-2");
    code = run((const char *const[]){"bench", "-m", model, "--reference", "-p", "4", "-n", "2",
                                     "-r", "1", "-o", "csv", NULL},
               err, sizeof err);
    EXPECT(code == 0 && !strncmp(out, "model,", 6) && count_lines(out) == 3,
           "bench -o csv exited %d:\n%s", code, out);
}

/* chat on piped input: commands stay out of the conversation, and an answer cut by -n says so.
 * (Ctrl-C during an answer: tests/test_chat_interrupt.sh, on the real model, whose answers last
 * long enough to interrupt.) */
static void test_chat(const char *model) {
    char input[sizeof dir + 16], err[8192];
    snprintf(input, sizeof input, "%s/chat.in", dir);
    FILE *f = fopen(input, "w");
    if (f) fputs("/help\n/bogus\nhello\n/exit\n", f), fclose(f);
    stdin_path = input;
    /* seed 1: an answer that does not end before 2 tokens */
    int code = run((const char *const[]){"chat", "-m", model, "--reference", "-n", "2",
                                         "--chat-template", "chatml", "-s", "1", NULL},
                   err, sizeof err);
    stdin_path = "/dev/null";
    EXPECT(code == 0, "chat exited %d: %s", code, err);
    EXPECT(strstr(err, "/clear") && strstr(err, "unknown command") &&
               strstr(err, "answer cut at 2 tokens"),
           "chat's stderr lacks the help, the unknown command or the cut: %s", err);
}

/* clinfer verify on the tiny model: 0 and the table, 1 naming a corrupted op, 2 for an error. */
static void test_verify(const char *model) {
    char err[4096];
    int code = run((const char *const[]){"verify", "-m", model, "--kernel-path", "fast", NULL}, err,
                   sizeof err);
    EXPECT(code == 2 && count_lines(err) == 1 && strstr(err, "--kernel-path"),
           "verify --kernel-path fast exited %d: %s", code, err);
    code = run((const char *const[]){"verify", "-m", model, "--reference", "-n", "5", NULL}, err,
               sizeof err);
    EXPECT(code == 0 && strstr(out, "max abs") && strstr(out, "prefill") &&
               strstr(out, "verify: OK"),
           "verify --reference exited %d: %s\n%s", code, err, out);
    size_t devices = 0;
    if (clinfer_device_count(&devices) != CLINFER_OK || devices == 0) return;
    code = run((const char *const[]){"verify", "-m", model, "-n", "5", NULL}, err, sizeof err);
    EXPECT(code == 0 && strstr(out, "rmsnorm attn_norm") && strstr(out, "verify: OK"),
           "verify exited %d: %s\n%s", code, err, out);
    setenv("CLINFER_FAULT", "corrupt-swiglu:2:7", 1);
    code = run((const char *const[]){"verify", "-m", model, "-n", "5", NULL}, err, sizeof err);
    unsetenv("CLINFER_FAULT");
    EXPECT(code == 1 && strstr(out, "FAILED: 1 of") &&
               strstr(out, "the first: prefill layer 1 swiglu (y)"),
           "verify with a corrupted swiglu exited %d: %s\n%s", code, err, out);
}

/* chat's /system, /save and /load: the saved file holds the system message and the turns;
 * loading it restores them (evaluated: the next answer comes); a malformed or missing file is
 * refused with an error naming what is wrong, and the chat goes on. */
static void test_chat_commands(const char *model) {
    char input[sizeof dir + 16], saved[sizeof dir + 16], err[8192], text[4096];
    snprintf(input, sizeof input, "%s/chat.in", dir);
    snprintf(saved, sizeof saved, "%s/chat.json", dir);
    static const char *const bad[][2] = {
        {"{\"messages\": [", "is not valid JSON"},
        {"[1, 2]", "is not a JSON object"},
        {"{\"system\": 7, \"messages\": []}", "\"system\" is not a string or null"},
        {"{\"system\": null}", "\"messages\" is missing or not an array"},
        {"{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}",
         "messages[0] has no \"role\""},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"user\"}]}",
         "messages[1] has no string \"content\""},
        {"", "is not valid JSON"},
    };
    size_t n_bad = sizeof bad / sizeof bad[0];
    FILE *f = fopen(input, "w");
    if (!f) {
        EXPECT(0, "cannot write %s", input);
        return;
    }
    fprintf(f, "/system You answer in rhymes.\nhello\n/save %s\n/clear\n/load %s\nagain\n", saved,
            saved);
    for (size_t i = 0; i < n_bad; i++) {
        char path[sizeof dir + 16];
        snprintf(path, sizeof path, "%s/bad%zu.json", dir, i);
        FILE *b = fopen(path, "w");
        if (b) fputs(bad[i][0], b), fclose(b);
        fprintf(f, "/load %s\n", path);
    }
    fprintf(f, "/load %s/missing.json\n/load\n/system\nlast\n", dir);
    fclose(f);
    stdin_path = input;
    int code = run((const char *const[]){"chat", "-m", model, "--reference", "-n", "2", "-c", "512",
                                         "--chat-template", "chatml", "-s", "1", NULL},
                   err, sizeof err);
    stdin_path = "/dev/null";
    EXPECT(code == 0, "chat with /system, /save, /load exited %d: %s", code, err);
    slurp(saved, text, sizeof text);
    cJSON *root = cJSON_Parse(text);
    const cJSON *msgs = cJSON_GetObjectItem(root, "messages");
    const cJSON *first = cJSON_GetArrayItem(msgs, 0), *second = cJSON_GetArrayItem(msgs, 1);
    EXPECT(
        !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(root, "system")) ?: "",
                "You answer in rhymes.") &&
            cJSON_GetArraySize(msgs) == 2 &&
            !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(first, "role")) ?: "", "user") &&
            !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(first, "content")) ?: "", "hello") &&
            !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(second, "role")) ?: "", "assistant"),
        "/save wrote:\n%s", text);
    cJSON_Delete(root);
    EXPECT(strstr(err, "system message set") && strstr(err, "saved 3 messages") &&
               strstr(err, "loaded 3 messages") && strstr(err, "no system message"),
           "chat's stderr lacks /system, /save or /load: %s", err);
    /* three answers (hello, again after /load, last), each cut at 2 tokens */
    const char *p = err;
    int answers = 0;
    while ((p = strstr(p, "answer cut at 2 tokens")))
        answers++, p++;
    EXPECT(answers == 3, "%d answers, want 3 (hello, again, last): %s", answers, err);
    for (size_t i = 0; i < n_bad; i++)
        EXPECT(strstr(err, bad[i][1]), "/load of '%s' does not say '%s': %s", bad[i][0], bad[i][1],
               err);
    EXPECT(strstr(err, "missing.json': No such file") && strstr(err, "/load needs a file name"),
           "/load of a missing file or none: %s", err);
    remove(saved);
}

/* --version lists what clinfer_supported lists; a file of an architecture close to a supported
 * one is refused naming the supported ones and the closest. */
static void test_supported(const char *model_dir) {
    char err[4096], line[1024];
    EXPECT(run((const char *const[]){"--version", NULL}, err, sizeof err) == 0 &&
               !strncmp(out, "clinfer " CLINFER_VERSION_STRING "\n", 9),
           "--version: %s%s", out, err);
    static const struct {
        clinfer_support_kind kind;
        const char *label;
    } kinds[] = {{CLINFER_SUPPORT_ARCHITECTURE, "architectures:"},
                 {CLINFER_SUPPORT_WEIGHT_TYPE, "weight types:"},
                 {CLINFER_SUPPORT_TOKENIZER, "tokenizers:"},
                 {CLINFER_SUPPORT_CHAT_TEMPLATE, "chat templates:"},
                 {CLINFER_SUPPORT_KERNEL_PATH, "kernel paths:"}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const char *at = strstr(out, kinds[k].label);
        size_t len = at ? strcspn(at, "\n") : 0;
        snprintf(line, sizeof line, "%.*s", (int)len, at ? at : "");
        const char *name;
        size_t i = 0;
        for (; (name = clinfer_supported(kinds[k].kind, i)); i++)
            EXPECT(strstr(line, name), "--version's '%s' line lacks %s: %s", kinds[k].label, name,
                   line);
        EXPECT(i > 0 && at, "%s: %zu supported, line '%s'", kinds[k].label, i, line);
    }
    EXPECT(clinfer_supported(CLINFER_SUPPORT_KERNEL_PATH, 99) == NULL &&
               clinfer_supported((clinfer_support_kind)99, 0) == NULL,
           "clinfer_supported past the end is not NULL");

    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/llama4.gguf", model_dir);
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama4", CLINFER_DT_Q8_0);
    EXPECT(tiny_model_write(&spec, path) == 0, "cannot write %s", path);
    int code = run((const char *const[]){"info", "-m", path, "--reference", NULL}, err, sizeof err);
    EXPECT(code == 1 && count_lines(err) == 1 &&
               strstr(err, "architecture 'llama4' is not supported (llama, ") &&
               strstr(err, "; closest: llama ("),
           "the refusal of llama4 does not list the supported and name llama as closest: %s", err);
    remove(path);
}

static void test_tiny_model(void) {
    char model[sizeof dir + 16], err[4096], first[sizeof out];
    snprintf(model, sizeof model, "%s/tiny.gguf", dir);
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_Q8_0);
    if (tiny_model_write(&spec, model) != 0) {
        EXPECT(0, "cannot write the tiny model %s", model);
        return;
    }
    ERR("no-such-device", "run", "-m", model, "-p", "hi", "--device", "no-such-device");
    ERR("--chat-template", "run", "-m", model, "--reference", "-p", "hi", "--chat");
    ERR("closest: chatml", "run", "-m", model, "--reference", "-p", "hi", "--chat-template",
        "chatm");

    const char *const gen[] = {"run",     "-m", model,     "--reference", "-p",     "hello world",
                               "-n",      "12", "--seed",  "5",           "--temp", "1.5",
                               "--top-k", "0",  "--min-p", "0",           NULL};
    int code = run(gen, err, sizeof err);
    EXPECT(code == 0, "run on the tiny model exited %d: %s", code, err);
    EXPECT(strstr(err, "decode") && strstr(err, "tok/s"), "no speed report on stderr: %s", err);
    snprintf(first, sizeof first, "%s", out);
    EXPECT(strlen(first) > 1, "run generated nothing");
    code = run(gen, err, sizeof err);
    EXPECT(code == 0 && !strcmp(first, out), "the same seed generated different text:\n%s\n%s",
           first, out);

    code = run((const char *const[]){"run", "-m", model, "--reference", "-p", "hi",
                                     "--chat-template", "chatml", "-n", "4", NULL},
               err, sizeof err);
    EXPECT(code == 0, "run --chat-template chatml exited %d: %s", code, err);

    code = run((const char *const[]){"info", "-m", model, "--reference", NULL}, err, sizeof err);
    EXPECT(code == 0, "info exited %d: %s", code, err);
    EXPECT(strstr(out, "architecture: llama") && strstr(out, "KV cache") &&
               strstr(out, "Q8_0") != NULL,
           "info lacks the architecture, memory plan or tensor types:\n%s", out);
    test_first_compile(model);
    test_llama_flags(model);
    test_chat(model);
    test_chat_commands(model);
    test_verify(model);
}

/* quantize: bad arguments give one error line; the tiny F32 model quantizes with a line per
 * tensor and a summary on stderr, and `info` then shows its Q4_K and Q6_K tensors. */
static void test_quantize(const char *missing, const char *not_gguf) {
    char src[sizeof dir + 16], dst[sizeof dir + 16], err[8192];
    snprintf(src, sizeof src, "%s/f32.gguf", dir);
    snprintf(dst, sizeof dst, "%s/q4km.gguf", dir);
    tiny_model_spec spec;
    tiny_model_default(&spec, "llama", CLINFER_DT_Q4_K); /* K-sized rows... */
    spec.type = CLINFER_DT_F32;                          /* ...in F32 */
    EXPECT(tiny_model_write(&spec, src) == 0, "cannot write %s", src);
    ERR(missing, "quantize", missing, dst, "Q8_0");
    ERR("not a GGUF file", "quantize", not_gguf, dst, "Q8_0");
    ERR("unknown file type 'Q3_K_L'", "quantize", src, dst, "Q3_K_L");
    ERR("expected IN OUT TYPE, got 2", "quantize", src, dst);
    ERR("--threads", "quantize", src, dst, "Q8_0", "-t", "many");
    ERR("--bogus", "quantize", "--bogus", src, dst, "Q8_0");
    char q8[sizeof dir + 16]; /* test_tiny_model's Q8_0 model */
    snprintf(q8, sizeof q8, "%s/tiny.gguf", dir);
    ERR("allow_requantize", "quantize", q8, dst, "Q4_0");
    EXPECT(access(dst, F_OK) != 0, "a failed quantize left %s", dst);

    int code = run((const char *const[]){"quantize", src, dst, "q4_k_m", "-t", "2", NULL}, err,
                   sizeof err);
    EXPECT(code == 0, "quantize exited %d: %s", code, err);
    EXPECT(strstr(err, "blk.1.attn_v.weight") && strstr(err, "F32  -> Q6_K") &&
               strstr(err, "MiB in") && count_lines(err) > 10,
           "quantize printed no progress or summary:\n%s", err);
    code = run((const char *const[]){"info", "-m", dst, "--reference", NULL}, err, sizeof err);
    EXPECT(code == 0 && strstr(out, "Q4_K") && strstr(out, "Q6_K"),
           "info on the quantized model (exit %d):\n%s%s", code, out, err);
    remove(src);
    remove(dst);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli PATH-TO-CLINFER\n");
        return 1;
    }
    binary = argv[1];
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char missing[sizeof dir + 32], not_gguf[sizeof dir + 32];
    snprintf(missing, sizeof missing, "%s/missing.gguf", dir);
    snprintf(not_gguf, sizeof not_gguf, "%s/notes.gguf", dir);
    FILE *f = fopen(not_gguf, "w");
    if (!f) {
        perror(not_gguf);
        return 1;
    }
    fputs("These are notes, not a model.\n", f);
    fclose(f);

    ERR(missing, "run", "-m", missing, "-p", "hello");
    ERR(not_gguf, "run", "-m", not_gguf, "-p", "hello");
    ERR(missing, "info", "-m", missing);
    ERR(not_gguf, "chat", "-m", not_gguf);
    ERR("--bogus", "run", "--bogus");
    ERR("-x", "run", "-x");
    ERR("--frobnicate", "info", "--frobnicate");
    ERR("--bogus", "chat", "--bogus", "-m", missing);
    ERR("-n", "run", "-m", not_gguf, "-p", "hello", "-n", "-2"); /* -1 is 'no limit' */
    ERR("-n", "chat", "-n", "-5");
    ERR("-n", "run", "-p", "hello", "-n", "lots");
    ERR("--temp", "run", "-p", "hello", "--temp", "hot");
    ERR("--top-p", "run", "-p", "hello", "--top-p", "2");
    ERR("--seed", "run", "-p", "hello", "--seed", "-3");
    ERR("'q4' is not an activations mode (default, q8, f32-head, f32-ends, f32)", "run", "-p",
        "hello", "--act", "q4");
    ERR("needs a value", "run", "-p");
    ERR("needs a value", "run", "-p", "hello", "--temp");
    ERR("prompt", "run", "-m", missing);
    ERR("unknown command", "frobnicate");

    char err[4096];
    EXPECT(run((const char *const[]){"run", "--help", NULL}, err, sizeof err) == 0,
           "run --help fails: %s", err);
    EXPECT(run((const char *const[]){"chat", "--help", NULL}, err, sizeof err) == 0,
           "chat --help fails: %s", err);
    EXPECT(run((const char *const[]){"info", "--help", NULL}, err, sizeof err) == 0,
           "info --help fails: %s", err);

    test_tiny_model();
    test_supported(dir);
    test_quantize(missing, not_gguf);

    remove_tree(dir);
    return finish("test_cli");
}
