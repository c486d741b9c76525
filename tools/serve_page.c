/* clinfer serve: the chat page at / (tools/serve_page.html, built into the binary as
 * serve_page_html by CMakeLists.txt). A browser's GET / (Accept naming text/html) gets it; ollama's
 * clients, which do not ask for HTML, keep getting "Ollama is running". The page's one <script>
 * and one <style> are inline, allowed by their SHA-256 in its Content-Security-Policy, so no
 * other script runs there, not even one that model output might smuggle in. */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "serve_http.h"

extern const char serve_page_html[];

static char page_csp[512];
static pthread_once_t page_once = PTHREAD_ONCE_INIT;

/* 'sha256-BASE64' of the text between open and close in the page; "'none'" without them. */
static void element_hash(const char *open, const char *close, char *out, size_t size) {
    const char *start = strstr(serve_page_html, open);
    const char *end = start ? strstr(start + strlen(open), close) : NULL;
    unsigned char digest[EVP_MAX_MD_SIZE], b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
    unsigned n = 0;
    if (!end || !EVP_Digest(start + strlen(open), (size_t)(end - start - strlen(open)), digest, &n,
                            EVP_sha256(), NULL)) {
        snprintf(out, size, "'none'");
        return;
    }
    EVP_EncodeBlock(b64, digest, (int)n);
    snprintf(out, size, "'sha256-%s'", (const char *)b64);
}

static void build_csp(void) {
    char script[128], style[128];
    element_hash("<script>", "</script>", script, sizeof script);
    element_hash("<style>", "</style>", style, sizeof style);
    snprintf(page_csp, sizeof page_csp,
             "default-src 'none'; script-src %s; style-src %s; connect-src 'self'; img-src data:; "
             "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
             script, style);
}

bool serve_wants_page(struct MHD_Connection *c) {
    const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
    for (const char *p = accept; p && *p; p++)
        if (!strncasecmp(p, "text/html", 9)) return true;
    return false;
}

enum MHD_Result serve_answer_page(request *r, struct MHD_Connection *c) {
    pthread_once(&page_once, build_csp);
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        strlen(serve_page_html), (void *)serve_page_html, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "text/html; charset=utf-8");
    MHD_add_response_header(resp, "Content-Security-Policy", page_csp);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    return serve_queue_response(r, c, 200, resp);
}
