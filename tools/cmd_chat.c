/* clinfer chat: a multi-turn conversation on stdin. The context keeps every turn; each new
 * turn evaluates only the text that the whole conversation, rendered again with the chat
 * template, adds after what the context already holds. Ctrl-C stops an answer (the part
 * written stays in the conversation); at the prompt it quits. Lines starting with '/' are
 * commands (/help), never sent to the model. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_common.h"
#include "conversation.h"
#include "line_input.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* Streams the answer until Ctrl-C. */
static bool stream_until_interrupted(const char *text, size_t len, void *user) {
    return !interrupted && cli_stream_text(text, len, user);
}

static const char commands_help[] =
    "  /help         this list\n"
    "  /clear        forget the conversation (the system message stays)\n"
    "  /system TEXT  set the system message (none without TEXT) and start over\n"
    "  /save FILE    write the conversation to FILE (JSON: system and messages)\n"
    "  /load FILE    continue the conversation /save wrote to FILE\n"
    "  /exit         quit (also Ctrl-D, or Ctrl-C at the prompt)\n"
    "  //text        send text that starts with '/'\n"
    "Ctrl-C during an answer stops it.\n";

static void usage(FILE *out) {
    fprintf(out,
            "usage: clinfer chat [-m MODEL] [OPTIONS]\n\n"
            "Reads one user message per line from stdin (with line editing and history on a\n"
            "terminal) and streams each answer to stdout. Commands:\n%s\n"
            "  -n, --n-predict N    at most N tokens per answer; -1: no limit (default 512)\n"
            "      --system TEXT    a system message that opens the conversation\n"
            "      --chat-template NAME  a chat template by name instead of the\n"
            "                       model's (`clinfer --version` lists them)\n" CLI_CTX_HELP
                CLI_ACT_HELP CLI_MODEL_HELP CLI_SAMPLER_HELP,
            commands_help);
}

static int chat_option(int opt, const char *arg, void *user) {
    return cli_gen_option(opt, arg, user);
}

/* 0 to go on, 1 on an error (printed), 2 after --help. */
static int parse(int argc, char **argv, cli_gen_opts *o) {
    static const struct option options[] = {CLI_GEN_OPTIONS, {NULL, 0, NULL, 0}};
    int rc =
        cli_parse_options("chat", argc, argv, ":" CLI_GEN_SHORT, options, chat_option, o, usage);
    if (!rc && optind < argc) return cli_error("chat: unexpected argument '%s'", argv[optind]);
    return rc;
}

typedef struct {
    cli_generator g;
    const cli_gen_opts *opts;
    conversation conv;
    char *held; /* the text the context holds: a rendering prefix plus the answers */
} chat_session;

/* Empties the context: the next turn evaluates the whole conversation. */
static void chat_forget(chat_session *s) {
    clinfer_context_reset(s->g.ctx);
    free(s->held);
    s->held = NULL;
}

/* Forgets all but the system message and the newest user message: a new conversation that
 * starts with the question that did not fit. False if there was nothing to forget. */
static bool chat_start_over(chat_session *s) {
    size_t base = conversation_base(&s->conv);
    if (s->conv.n <= base + 1) return false;
    clinfer_chat_message last = s->conv.m[--s->conv.n];
    conversation_truncate(&s->conv, base);
    s->conv.m[s->conv.n++] = last;
    chat_forget(s);
    fprintf(stderr,
            "clinfer: the conversation no longer fits the context of %u tokens; "
            "starting a new one (--ctx sets a longer context)\n",
            clinfer_context_n_ctx(s->g.ctx));
    return true;
}

enum { TURN_TOO_LONG = 3 };

/* One turn: the conversation (ending in the new user message) is rendered; what extends
 * `held` is evaluated and answered. When the rendering no longer starts with `held` (a
 * template that trims answers), the context is rebuilt from the whole rendering. Returns 0,
 * 1 on an error (printed) or TURN_TOO_LONG, having changed nothing, when the new text does
 * not fit the context. */
static int chat_turn(chat_session *s) {
    char *rendered = NULL;
    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    cli_text_sink answer = {0};
    int rc = 1;
    clinfer_status st = clinfer_chat_apply_template(s->g.model, s->opts->chat_template, s->conv.m,
                                                    s->conv.n, true, &rendered);
    if (st != CLINFER_OK) {
        cli_error("chat: %s", clinfer_last_error());
        goto cleanup;
    }
    size_t held_len = s->held ? strlen(s->held) : 0;
    bool extends = held_len > 0 && clinfer_context_n_past(s->g.ctx) > 0 &&
                   !strncmp(rendered, s->held, held_len);
    if (!extends) {
        clinfer_context_reset(s->g.ctx);
        held_len = 0;
    }
    if (cli_tokenize(s->g.model, rendered + held_len, true, !extends, &tokens, &n_tokens))
        goto cleanup;
    /* The answer gets what room the context has left, up to -n. */
    size_t room = clinfer_context_n_ctx(s->g.ctx) - clinfer_context_n_past(s->g.ctx);
    if (n_tokens >= room) {
        rc = TURN_TOO_LONG;
        goto cleanup;
    }
    size_t n_predict = (size_t)s->opts->n_predict;
    if (n_predict > room - n_tokens) n_predict = room - n_tokens;
    clinfer_generate_stats stats = {0};
    cli_note_seed(&s->g);
    interrupted = 0;
    st = clinfer_generate(s->g.ctx, tokens, n_tokens, (int32_t)n_predict, s->g.sampler,
                          stream_until_interrupted, &answer, &stats);
    fputc('\n', stdout);
    fflush(stdout);
    if (interrupted)
        fprintf(stderr, "clinfer: answer stopped (Ctrl-C)\n");
    else if (st == CLINFER_OK && stats.n_generated == n_predict)
        fprintf(stderr, "clinfer: answer cut at %zu tokens (-n, or the end of the context)\n",
                n_predict);
    interrupted = 0;
    if (st != CLINFER_OK || answer.failed) {
        cli_error("chat: %s (%s)", answer.failed ? "out of memory" : clinfer_last_error(),
                  clinfer_status_str(st));
        goto cleanup;
    }
    if (s->opts->model.params.verbose) cli_print_stats(-1, &stats);
    const char *reply = answer.text ? answer.text : "";
    size_t rendered_len = strlen(rendered), reply_len = strlen(reply);
    char *held = realloc(rendered, rendered_len + reply_len + 1);
    if (!held || !conversation_add(&s->conv, "assistant", reply)) {
        cli_error("chat: out of memory keeping the conversation");
        rendered = held ? held : rendered;
        goto cleanup;
    }
    memcpy(held + rendered_len, reply, reply_len + 1);
    free(s->held);
    s->held = held;
    rendered = NULL;
    rc = 0;
cleanup:
    free(rendered);
    free(tokens);
    free(answer.text);
    return rc;
}

/* /load: the conversation in path replaces the current one, and its rendering is evaluated, so
 * that the next turn adds only its own text. A file that cannot be read or used changes nothing
 * (its error printed). Returns 1 only when evaluating failed (printed), which ends the chat. */
static int chat_load(chat_session *s, const char *path) {
    conversation loaded = {0};
    char *rendered = NULL;
    int32_t *tokens = NULL;
    size_t n_tokens = 0;
    int rc = 0;
    if (conversation_load(path, &loaded)) goto cleanup;
    clinfer_status st = CLINFER_OK;
    if (loaded.n) {
        st = clinfer_chat_apply_template(s->g.model, s->opts->chat_template, loaded.m, loaded.n,
                                         false, &rendered);
        if (st != CLINFER_OK) {
            cli_error("/load: %s", clinfer_last_error());
            goto cleanup;
        }
        if (cli_tokenize(s->g.model, rendered, true, true, &tokens, &n_tokens)) goto cleanup;
        if (n_tokens >= clinfer_context_n_ctx(s->g.ctx)) {
            cli_error("/load: the conversation in '%s' (%zu tokens) does not fit the context of "
                      "%u tokens (--ctx sets a longer one)",
                      path, n_tokens, clinfer_context_n_ctx(s->g.ctx));
            goto cleanup;
        }
    }
    chat_forget(s);
    if (n_tokens && (st = clinfer_eval(s->g.ctx, tokens, n_tokens)) != CLINFER_OK) {
        rc = cli_error("chat: %s (%s)", clinfer_last_error(), clinfer_status_str(st));
        goto cleanup;
    }
    conversation_free(&s->conv);
    s->conv = loaded;
    loaded = (conversation){0};
    if (n_tokens) {
        s->held = rendered;
        rendered = NULL;
    }
    fprintf(stderr, "clinfer: loaded %zu messages from %s (%zu tokens)\n", s->conv.n, path,
            n_tokens);
cleanup:
    conversation_free(&loaded);
    free(rendered);
    free(tokens);
    return rc;
}

enum { COMMAND_GO_ON, COMMAND_FAILED, COMMAND_EXIT };

/* A line starting with '/' (not "//"): runs the command; errors in using one are printed and
 * the chat goes on (COMMAND_FAILED: one that ends it). */
static int chat_command(chat_session *s, const char *line) {
    size_t word = strcspn(line, " \t");
    const char *arg = line + word + strspn(line + word, " \t");
#define IS(name) (word == strlen(name) && !strncmp(line, name, word))
    if (IS("/exit")) return COMMAND_EXIT;
    if (IS("/clear")) {
        conversation_truncate(&s->conv, conversation_base(&s->conv));
        chat_forget(s);
        fprintf(stderr, "clinfer: conversation cleared\n");
    } else if (IS("/system")) {
        conversation_truncate(&s->conv, 0);
        chat_forget(s);
        if (*arg && !conversation_add(&s->conv, "system", arg)) {
            cli_error("chat: out of memory");
            return COMMAND_FAILED;
        }
        fprintf(stderr, "clinfer: %s; conversation started over\n",
                *arg ? "system message set" : "no system message");
    } else if ((IS("/save") || IS("/load")) && !*arg) {
        cli_error("%.*s needs a file name", (int)word, line);
    } else if (IS("/save")) {
        if (!conversation_save(&s->conv, arg))
            fprintf(stderr, "clinfer: saved %zu messages to %s\n", s->conv.n, arg);
    } else if (IS("/load")) {
        if (chat_load(s, arg)) return COMMAND_FAILED;
    } else {
        fprintf(stderr, "%s%s", IS("/help") ? "" : "clinfer: unknown command\n", commands_help);
    }
#undef IS
    return COMMAND_GO_ON;
}

int cmd_chat(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o, 512);
    int rc = parse(argc, argv, &o);
    if (rc) return rc == 2 ? 0 : 1;

    chat_session s = {.opts = &o};
    char *line = NULL;
    rc = 1;
    if (cli_generator_open("chat", &o, &s.g)) goto cleanup;
    if (o.system && !conversation_add(&s.conv, "system", o.system)) {
        cli_error("chat: out of memory");
        goto cleanup;
    }
    bool interactive = isatty(STDIN_FILENO);
    /* no SA_RESTART: Ctrl-C interrupts a read at the prompt */
    struct sigaction sa = {.sa_handler = on_sigint};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (interactive) fprintf(stderr, "clinfer: chatting; /help lists the commands\n");
    for (;;) {
        bool stopped;
        free(line);
        line = line_read("> ", interactive, &stopped);
        if (!line || interrupted) break; /* end of input, or Ctrl-C at the prompt */
        const char *text = line;
        if (line[0] == '/' && line[1] != '/') {
            if (interactive) line_remember(line);
            int done = chat_command(&s, line);
            if (done == COMMAND_EXIT) break;
            if (done == COMMAND_FAILED) goto cleanup;
            continue;
        }
        if (line[0] == '/') text++; /* "//text" sends "/text" */
        if (!*text) continue;
        if (interactive) line_remember(line);
        if (!conversation_add(&s.conv, "user", text)) {
            cli_error("chat: out of memory");
            goto cleanup;
        }
        int turn = chat_turn(&s);
        if (turn == TURN_TOO_LONG && chat_start_over(&s)) turn = chat_turn(&s);
        if (turn == TURN_TOO_LONG) {
            fprintf(stderr, "clinfer: that message alone does not fit the context of %u tokens\n",
                    clinfer_context_n_ctx(s.g.ctx));
            conversation_truncate(&s.conv, s.conv.n - 1);
            continue;
        }
        if (turn) goto cleanup;
    }
    rc = 0;
cleanup:
    free(line);
    free(s.held);
    conversation_free(&s.conv);
    cli_generator_free(&s.g);
    return rc;
}
