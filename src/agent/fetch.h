/*
 * fetch.h - the client side of an agent's HTTP endpoint: where a node's
 * agent listens (from its Node object) and a plain GET to it, for
 * `top nodes`, the API server's pods/log proxy (which takes the endpoint and
 * opens its own streaming transfer) and tests.
 */
#ifndef GS_AGENT_FETCH_H
#define GS_AGENT_FETCH_H

#include <jansson.h>
#include <stddef.h>

/* The agent endpoint of a Node object ("http://127.0.0.1:43883"): the
 * annotation gpusched.io/agent-endpoint, else the first InternalIP address
 * with status.daemonEndpoints.kubeletEndpoint.Port. Writes "" when neither. */
void gs_agent_endpoint(const json_t *node, char *buf, size_t len);

/* GET endpoint+path (timeout_ms; 0 = 10 s). 0 with *body (malloc'd,
 * NUL-terminated) and *code, or GS_EIO when the agent cannot be reached or
 * its answer is cut short (fewer bytes than announced): never a partial body. */
int gs_agent_get(const char *endpoint, const char *path, long timeout_ms, char **body, size_t *len, long *code);
/* Same with "Authorization: Bearer token" (token NULL: none). Both refuse
 * (GS_EINVAL) an endpoint that is not http(s)://host:port (core/endpoint.h). */
int gs_agent_get_auth(const char *endpoint, const char *path, const char *token, long timeout_ms, char **body,
                      size_t *len, long *code);

#endif
