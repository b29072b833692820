/*
 * fetch.c - GET from a node agent's endpoint with libcurl; see fetch.h.
 */
#include "agent/fetch.h"
#include "control/curlfd.h"
#include "core/endpoint.h"
#include "core/error.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct acc {
    char *p;
    size_t n;
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
    struct acc *a = arg;
    size_t n = size * nmemb;
    char *q = realloc(a->p, a->n + n + 1);
    if (!q) return 0;
    memcpy(q + a->n, data, n);
    a->p = q;
    a->n += n;
    a->p[a->n] = 0;
    return n;
}

void gs_agent_endpoint(const json_t *node, char *buf, size_t len)
{
    buf[0] = 0;
    const char *ann = json_string_value(
        json_object_get(json_object_get(json_object_get(node, "metadata"), "annotations"), "gpusched.io/agent-endpoint"));
    if (ann) {
        snprintf(buf, len, "%s", ann);
        return;
    }
    json_t *st = json_object_get(node, "status");
    json_int_t port = json_integer_value(
        json_object_get(json_object_get(json_object_get(st, "daemonEndpoints"), "kubeletEndpoint"), "Port"));
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(st, "addresses"), i, a) {
        const char *t = json_string_value(json_object_get(a, "type"));
        const char *ad = json_string_value(json_object_get(a, "address"));
        if (port > 0 && t && ad && !strcmp(t, "InternalIP")) {
            snprintf(buf, len, "http://%s:%lld", ad, (long long)port);
            return;
        }
    }
}

int gs_agent_get(const char *endpoint, const char *path, long timeout_ms, char **body, size_t *len, long *code)
{
    return gs_agent_get_auth(endpoint, path, NULL, timeout_ms, body, len, code);
}

int gs_agent_get_auth(const char *endpoint, const char *path, const char *token, long timeout_ms, char **body,
                      size_t *len, long *code)
{
    *body = NULL;
    *len = 0;
    *code = 0;
    char url[2048], why[400];
    if (gs_endpoint_check(endpoint, why, sizeof why)) return GS_EINVAL;
    if (snprintf(url, sizeof url, "%s%s", endpoint, path) >= (int)sizeof url) return GS_EINVAL;
    CURL *h = curl_easy_init();
    if (!h) return GS_ENOMEM;
    struct acc a = {calloc(1, 1), 0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, gs_curl_sockopt_cloexec);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 10000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    struct curl_slist *hd = NULL;
    if (token) {
        char line[300];
        snprintf(line, sizeof line, "Authorization: Bearer %s", token);
        hd = curl_slist_append(hd, line);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    }
    CURLcode cc = curl_easy_perform(h);
    curl_slist_free_all(hd);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, code);
    curl_easy_cleanup(h);
    if (cc != CURLE_OK || !a.p) {
        free(a.p);
        return GS_EIO;
    }
    *body = a.p;
    *len = a.n;
    return 0;
}
