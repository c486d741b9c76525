/* clinfer serve: the paths of the endpoints, below both the routing (serve_http.c) and what
 * answers before libmicrohttpd (serve_accept.c), so that calls go one way. */
#include <string.h>

#include "serve.h"

serve_endpoint serve_endpoint_of(const char *path, size_t len) {
    static const struct {
        const char *path;
        serve_endpoint ep;
    } routes[] = {{"/v1/chat/completions", SERVE_EP_chat},
                  {"/chat/completions", SERVE_EP_chat},
                  {"/v1/completions", SERVE_EP_completions},
                  {"/completions", SERVE_EP_completions},
                  {"/v1/embeddings", SERVE_EP_embeddings},
                  {"/embeddings", SERVE_EP_embeddings},
                  {"/v1/models", SERVE_EP_models},
                  {"/models", SERVE_EP_models},
                  {"/tokenize", SERVE_EP_tokenize},
                  {"/detokenize", SERVE_EP_detokenize},
                  {"/props", SERVE_EP_props},
                  {"/health", SERVE_EP_health},
                  {"/metrics", SERVE_EP_metrics},
                  {"/api/chat", SERVE_EP_ollama_chat},
                  {"/api/generate", SERVE_EP_ollama_generate},
                  {"/api/embed", SERVE_EP_ollama_embed},
                  {"/api/embeddings", SERVE_EP_ollama_embeddings},
                  {"/api/show", SERVE_EP_ollama_show},
                  {"/api/tags", SERVE_EP_ollama_tags},
                  {"/api/version", SERVE_EP_ollama_version},
                  {"/", SERVE_EP_root}};
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strlen(routes[i].path) == len && !memcmp(path, routes[i].path, len))
            return routes[i].ep;
    return SERVE_EP_other;
}
