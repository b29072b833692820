/*
 * netguard.c - per-address token buckets for failed authentications; see
 * netguard.h.
 *
 * A fixed table (no allocation per client, so a client cannot grow it):
 * the address hashes to a slot, and a few neighbours are probed; when all
 * are taken by other addresses the least recently seen of them is reused.
 * A reused slot starts full, which only ever favours the newcomer by one
 * burst, and an attacker cycling addresses fast enough to evict itself
 * needs that many addresses anyway.
 */
#include "control/netguard.h"
#include "core/error.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 4096
#define PROBE 8

struct slot {
    unsigned char addr[16];
    bool used;
    double tokens;
    int64_t last_ns;
};

struct gs_netguard {
    pthread_mutex_t mu;
    double qps, burst;
    struct slot s[SLOTS];
};

int gs_netguard_new(const struct gs_netguard_opts *o, struct gs_netguard **out)
{
    struct gs_netguard *g = calloc(1, sizeof *g);
    if (!g) return GS_ENOMEM;
    pthread_mutex_init(&g->mu, NULL);
    g->qps = o && o->fail_qps ? o->fail_qps : 10;
    g->burst = o && o->fail_burst > 0 ? o->fail_burst : 2 * (g->qps > 0 ? g->qps : 1);
    /* A bucket that never holds a whole token would refuse every failure
     * (a rate of 0.2/s means one try per 5 s, not none). */
    if (g->burst < 1) g->burst = 1;
    *out = g;
    return 0;
}

void gs_netguard_free(struct gs_netguard *g)
{
    if (!g) return;
    pthread_mutex_destroy(&g->mu);
    free(g);
}

/* IPv4 as a v4-mapped IPv6 address, so both families share one key form. */
static void key_of(const struct sockaddr *sa, unsigned char k[16])
{
    memset(k, 0, 16);
    if (sa && sa->sa_family == AF_INET6) {
        memcpy(k, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    } else if (sa && sa->sa_family == AF_INET) {
        k[10] = k[11] = 0xff;
        memcpy(k + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    }
}

static uint32_t hash(const unsigned char k[16])
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < 16; i++) h = (h ^ k[i]) * 16777619u;
    return h;
}

bool gs_netguard_fail_take(struct gs_netguard *g, const struct sockaddr *sa, int64_t now_ns)
{
    if (!g || g->qps < 0) return true;
    unsigned char k[16];
    key_of(sa, k);
    uint32_t h = hash(k);
    pthread_mutex_lock(&g->mu);
    struct slot *hit = NULL, *victim = NULL;
    for (int i = 0; i < PROBE && !hit; i++) {
        struct slot *s = &g->s[(h + (uint32_t)i) % SLOTS];
        if (s->used && !memcmp(s->addr, k, 16)) hit = s;
        else if (!victim || !s->used || (victim->used && s->last_ns < victim->last_ns)) victim = s;
    }
    if (!hit) {
        hit = victim;
        memcpy(hit->addr, k, 16);
        hit->used = true;
        hit->tokens = g->burst;
        hit->last_ns = now_ns;
    }
    double dt = (double)(now_ns - hit->last_ns) / 1e9;
    if (dt > 0) hit->tokens += dt * g->qps;
    if (hit->tokens > g->burst) hit->tokens = g->burst;
    hit->last_ns = now_ns;
    bool ok = hit->tokens >= 1;
    if (ok) hit->tokens -= 1;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

void gs_netguard_addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)len);
}
