/*
 * netguard.h - what the API server allows a network client before it has
 * proved who it is: a token bucket per source address charged by every
 * request that fails authentication (no token, a wrong one). A client
 * guessing tokens, or a flood of anonymous requests, gets 429 from the
 * bucket instead of a fresh 401 each time; authenticated callers are
 * limited per token by auth.c and never charged here.
 *
 * Connection counts (total, per address) and the idle timeout are
 * libmicrohttpd's own options, set in apiserver.c; this file keeps only what
 * libmicrohttpd has no option for. Thread-safe.
 */
#ifndef GS_CONTROL_NETGUARD_H
#define GS_CONTROL_NETGUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct gs_netguard_opts {
    double fail_qps;   /* failed authentications per second per address; 0: 10, < 0: unlimited */
    double fail_burst; /* 0: 2 x fail_qps; at least 1 */
};

struct gs_netguard;

/* 0 or GS_ENOMEM; free with gs_netguard_free. */
int gs_netguard_new(const struct gs_netguard_opts *o, struct gs_netguard **out);
void gs_netguard_free(struct gs_netguard *g);

/* Charges one failed authentication to the address sa; false when its bucket
 * is empty (answer 429). Addresses beyond the table's size share a bucket. */
bool gs_netguard_fail_take(struct gs_netguard *g, const struct sockaddr *sa, int64_t now_ns);

/* The address as text ("127.0.0.1", "::1") for messages. */
void gs_netguard_addr_text(const struct sockaddr *sa, char *buf, size_t len);

#endif
