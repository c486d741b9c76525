/* clinfer serve: an OpenAI-compatible HTTP server (tools/serve.h). Listens first, so that
 * /health answers 503 while the model loads; then runs until SIGINT or SIGTERM, answers what is
 * in flight, and exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_common.h"
#include "serve.h"

enum {
    OPT_HOST = 512,
    OPT_PORT,
    OPT_PARALLEL,
    OPT_API_KEY,
    OPT_ALIAS,
    OPT_QUEUE,
    OPT_MAX_BODY,
    OPT_MAX_CONNS,
    OPT_MAX_CONNS_PER_IP,
    OPT_HEADER_TIMEOUT,
    OPT_BODY_TIMEOUT,
    OPT_DRAIN_TIMEOUT,
    OPT_SPECIAL_IN_CONTENT
};

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: clinfer serve [-m MODEL] [--host ADDR] [--port N] [-np N] [--api-key KEY]\n"
        "                     [OPTIONS]\n\n"
        "Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions and\n"
        "/v1/completions (stream: true for server-sent events), POST /v1/embeddings\n"
        "(mean-pooled hidden states of length 1), GET /v1/models, /health (503 until the\n"
        "model is loaded) and /metrics (Prometheus); llama-server's POST /tokenize,\n"
        "/detokenize and GET /props; ollama's /api/*; a chat page at / for a browser\n"
        "(http://127.0.0.1:8080/). Runs until SIGINT or SIGTERM, then\n"
        "answers the requests in flight (for --drain-timeout seconds) and exits 0.\n\n"
        "      --host ADDR      address to listen on (default 127.0.0.1: this machine only)\n"
        "      --port N         port; 0 picks a free one (default 8080)\n"
        "  -np, --parallel N    slots: requests generated at once (default 1), each a\n"
        "                       sequence of one context; every step evaluates a token of\n"
        "                       each generating slot and prompt tokens of starting ones\n"
        "                       in one batch (continuous batching)\n"
        "  -b, --batch-size N   tokens per step (default 256): a longer prompt is spread\n"
        "                       over several steps, beside the running streams\n"
        "      --queue N        requests that may wait for a slot; more get 503 (default 64)\n"
        "      --api-key KEY    answer only requests with 'Authorization: Bearer KEY' (401\n"
        "                       otherwise; /health stays open)\n"
        "  -c, --ctx-size N     context length of each slot; 0 is the model's (default 0);\n"
        "                       a slot keeps its last request's tokens, and a new prompt\n"
        "                       that starts with them evaluates only the rest\n"
        "      --chat-template NAME  chatml, llama3, llama2 or gemma instead of the model's\n"
        "      --alias NAME     the model's name in responses (default: the file's name)\n"
        "      --max-body BYTES largest request body; larger gets 413 (default 4194304)\n"
        "      --max-connections N  connections held at once (default 512); past them the\n"
        "                       one waiting longest for its request is closed, or when all\n"
        "                       are busy the newcomer gets 503\n"
        "      --max-connections-per-ip N  connections one address may hold; more are\n"
        "                       closed at once (default 0: no limit)\n"
        "      --header-timeout S   seconds to send a request's headers, from the connection's\n"
        "                       start or the previous response; then it closes (default 10)\n"
        "      --body-timeout S     seconds to send a request's body (default 30)\n"
        "      --drain-timeout S    after SIGINT or SIGTERM, seconds the requests in flight\n"
        "                       have to finish; then each open stream ends with an error\n"
        "                       event saying the server is stopping (default 30)\n"
        "      --special-in-content  read special tokens' text (\"<|im_start|>\") in chat\n"
        "                       messages as those tokens; by default it is plain text and\n"
        "                       only the chat template's own markers are special\n"
        "" CLI_ACT_HELP "" CLI_MODEL_HELP "\n"
        "Sampling defaults are llama.cpp's (temperature 0.8, top_k 40, top_p 0.95, min_p\n"
        "0.05); a request's fields override them. With no seed, each request draws one.\n");
}

typedef struct {
    cli_model_opts model;
    serve_server s;
    long port, parallel, queue, n_ctx, n_batch, max_body, max_conns, per_ip, header_s, body_s,
        drain_s;
    clinfer_activations act;
} serve_opts;

static int serve_option(int opt, const char *arg, void *user) {
    serve_opts *o = user;
    int used = cli_model_option(opt, arg, &o->model);
    if (!used) used = cli_act_option(opt, arg, &o->act);
    if (used) return used;
    switch (opt) {
    case OPT_HOST:
        o->s.host = arg;
        return 1;
    case OPT_PORT:
        return cli_parse_long("--port", arg, 0, 65535, &o->port) ? 1 : -1;
    case OPT_PARALLEL:
        return cli_parse_long("-np", arg, 1, 256, &o->parallel) ? 1 : -1;
    case OPT_QUEUE:
        return cli_parse_long("--queue", arg, 0, 65536, &o->queue) ? 1 : -1;
    case OPT_API_KEY:
        if (!arg[0]) return cli_error("--api-key: the key is empty"), -1;
        o->s.api_key = arg;
        return 1;
    case 'c':
        return cli_parse_long("-c", arg, 0, INT32_MAX, &o->n_ctx) ? 1 : -1;
    case 'b':
        return cli_parse_long("-b", arg, 1, 65536, &o->n_batch) ? 1 : -1;
    case OPT_CHAT_TEMPLATE:
        o->s.chat_template = arg;
        return 1;
    case OPT_ALIAS:
        o->s.model_id = arg;
        return 1;
    case OPT_MAX_BODY:
        return cli_parse_long("--max-body", arg, 1024, 1L << 30, &o->max_body) ? 1 : -1;
    case OPT_MAX_CONNS:
        return cli_parse_long("--max-connections", arg, 1, 65536, &o->max_conns) ? 1 : -1;
    case OPT_MAX_CONNS_PER_IP:
        return cli_parse_long("--max-connections-per-ip", arg, 0, 65536, &o->per_ip) ? 1 : -1;
    case OPT_HEADER_TIMEOUT:
        return cli_parse_long("--header-timeout", arg, 1, 3600, &o->header_s) ? 1 : -1;
    case OPT_BODY_TIMEOUT:
        return cli_parse_long("--body-timeout", arg, 1, 3600, &o->body_s) ? 1 : -1;
    case OPT_DRAIN_TIMEOUT:
        return cli_parse_long("--drain-timeout", arg, 0, 86400, &o->drain_s) ? 1 : -1;
    case OPT_SPECIAL_IN_CONTENT:
        o->s.special_in_content = true;
        return 1;
    default:
        return 0;
    }
}

/* llama-server's -np: two letters after one dash, which getopt_long cannot take. */
static void rewrite_np(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-np")) argv[i] = "--parallel";
}

static int parse(int argc, char **argv, serve_opts *o) {
    static const struct option options[] = {
        CLI_MODEL_OPTIONS,
        {"host", required_argument, NULL, OPT_HOST},
        {"port", required_argument, NULL, OPT_PORT},
        {"parallel", required_argument, NULL, OPT_PARALLEL},
        {"queue", required_argument, NULL, OPT_QUEUE},
        {"api-key", required_argument, NULL, OPT_API_KEY},
        {"ctx-size", required_argument, NULL, 'c'},
        {"batch-size", required_argument, NULL, 'b'},
        {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
        {"alias", required_argument, NULL, OPT_ALIAS},
        {"max-body", required_argument, NULL, OPT_MAX_BODY},
        {"max-connections", required_argument, NULL, OPT_MAX_CONNS},
        {"max-connections-per-ip", required_argument, NULL, OPT_MAX_CONNS_PER_IP},
        {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
        {"body-timeout", required_argument, NULL, OPT_BODY_TIMEOUT},
        {"drain-timeout", required_argument, NULL, OPT_DRAIN_TIMEOUT},
        {"special-in-content", no_argument, NULL, OPT_SPECIAL_IN_CONTENT},
        CLI_ACT_OPTIONS,
        {NULL, 0, NULL, 0}};
    rewrite_np(argc, argv);
    int rc = cli_parse_options("serve", argc, argv, ":" CLI_MODEL_SHORT "c:b:", options,
                               serve_option, o, usage);
    if (rc) return rc;
    if (optind < argc) return cli_error("serve: unexpected argument '%s'", argv[optind]);
    return 0;
}

/* The chat template renders, or chat requests could never be answered: a model without one
 * gets ChatML (as llama-server does), an unusable --chat-template is an error. */
static int check_template(serve_server *s) {
    clinfer_chat_message m = {"user", "hi"};
    char *out = NULL;
    clinfer_status st = clinfer_chat_apply_template(s->model, s->chat_template, &m, 1, true, &out);
    clinfer_free(out);
    if (st == CLINFER_OK) return 0;
    if (s->chat_template)
        return cli_error("serve: --chat-template %s: %s", s->chat_template, clinfer_last_error());
    fprintf(stderr,
            "clinfer: the model's chat template is not usable (%s); chat requests use "
            "chatml\n",
            clinfer_last_error());
    s->chat_template = "chatml";
    return 0;
}

/* The part of a path after its last '/'. */
static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int cmd_serve(int argc, char **argv) {
    serve_opts o = {.port = 8080,
                    .parallel = 1,
                    .queue = 64,
                    .max_body = 4L << 20,
                    .max_conns = 512,
                    .header_s = 10,
                    .body_s = 30,
                    .drain_s = 30};
    cli_model_opts_init(&o.model);
    o.s.host = "127.0.0.1";
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 2 ? 0 : 1;
    serve_server *s = &o.s;
    s->port = (uint16_t)o.port;
    s->n_slots = (size_t)o.parallel;
    s->queue_cap = (size_t)o.queue;
    s->max_body = (size_t)o.max_body;
    s->max_conns = (size_t)o.max_conns;
    s->max_conns_per_ip = (size_t)o.per_ip;
    s->header_ms = 1e3 * (double)o.header_s;
    s->body_ms = 1e3 * (double)o.body_s;
    s->drain_ms = 1e3 * (double)o.drain_s;
    clinfer_context_params_default(&s->cp);
    s->cp.n_ctx = (uint32_t)o.n_ctx;
    if (o.n_batch) s->cp.n_batch = (uint32_t)o.n_batch;
    s->cp.activations = o.act;
    s->start_ms = cli_now_ms();
    s->start_time = (long)time(NULL);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->idle, NULL);

    /* Every thread made from here on leaves these signals to sigwait below. */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    sigdelset(&signals, SIGPIPE);

    char buf[4096], err[256];
    const char *path;
    rc = 1;
    if (cli_model_path(&o.model, buf, sizeof buf, &path)) goto done;
    o.model.path = path;
    if (!s->model_id) s->model_id = base_name(path);
    s->model_path = path;
    if (serve_http_start(s, err, sizeof err)) {
        cli_error("serve: %s", err);
        goto done;
    }
    bool v6 = strchr(s->host, ':') != NULL; /* an IPv6 address goes in brackets in a URL */
    fprintf(stderr, "clinfer: listening on http://%s%s%s:%u, loading %s\n", v6 ? "[" : "", s->host,
            v6 ? "]" : "", (unsigned)s->port, path);
    if (cli_load_model(&o.model, &s->model, NULL) || check_template(s)) goto done;
    clinfer_status st = serve_pool_create(s->model, s->n_slots, &s->cp, s->queue_cap, &s->pool);
    if (st != CLINFER_OK) {
        cli_error("serve: cannot create a context of %zu slots: %s (%s)", s->n_slots,
                  clinfer_last_error(), clinfer_status_str(st));
        goto done;
    }
    atomic_store(&s->ready, true);
    fprintf(stderr,
            "clinfer: ready: model %s, %zu slots of %u tokens, %u tokens per step, queue %zu%s\n",
            s->model_id, s->n_slots, serve_pool_n_ctx(s->pool), serve_pool_n_batch(s->pool),
            s->queue_cap, s->api_key ? ", API key required" : "");
    int sig = 0;
    sigwait(&signals, &sig);
    fprintf(stderr,
            "clinfer: %s: answering the requests in flight for up to %ld s, then exiting (a "
            "second signal exits at once)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", o.drain_s);
    pthread_sigmask(SIG_UNBLOCK, &signals, NULL); /* their default action: terminate */
    rc = 0;
done:
    atomic_store(&s->stopping, true);
    serve_http_stop(s);
    serve_pool_free(s->pool);
    clinfer_model_free(s->model);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->lock);
    return rc;
}
