/*
 * endpoint.h - the one accepted shape of a node agent's endpoint.
 *
 * The annotation gpusched.io/agent-endpoint is written by the node and read
 * by the API server (pods/log proxy) and `gpusched top`, which build URLs
 * from it. Taken as it is, "http://10.0.0.1:1/admin#" or "file:///etc/"
 * would turn those into requests for anything. So an endpoint is exactly
 * scheme://host:port: http or https, a DNS name, IPv4 address or [IPv6]
 * literal, a port 1..65535, and nothing else (no userinfo, path, query or
 * fragment). The Node validation refuses anything else (422) and every user
 * checks again before building a URL.
 */
#ifndef GS_CORE_ENDPOINT_H
#define GS_CORE_ENDPOINT_H

#include <stddef.h>

#define GS_ANN_AGENT_ENDPOINT "gpusched.io/agent-endpoint"

/* 0 when ep is http(s)://host:port; -1 with why (naming the value) otherwise. */
int gs_endpoint_check(const char *ep, char *why, size_t wl);

#endif
