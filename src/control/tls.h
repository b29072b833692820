/*
 * tls.h - the server's certificate authority and serving certificate.
 *
 * kubectl never sends a bearer token over plain http, so the server speaks
 * HTTPS. On first start it creates, with GnuTLS, a CA (ECDSA P-256, ten
 * years) and a serving certificate signed by it for 127.0.0.1, ::1,
 * localhost, the host name and any extra names given, and keeps them in the
 * data directory (ca.crt, ca.key, server.crt, server.key; keys 0600). Later
 * starts reuse them, so a kubeconfig written once (certificate-authority-data
 * = ca.crt) keeps working. This is what k3s and kind do.
 */
#ifndef GS_CONTROL_TLS_H
#define GS_CONTROL_TLS_H

#include "core/error.h"

#include <stddef.h>

struct gs_tls {
    char *ca_pem;   /* CA certificate (PEM) */
    char *cert_pem; /* serving certificate (PEM) */
    char *key_pem;  /* serving key (PEM) */
};

/* Loads dir's certificates, creating them first when absent. extra_names:
 * more DNS names or IP addresses for the serving certificate (may be NULL).
 * 0, GS_EIO or GS_ENOMEM. Free with gs_tls_free. */
int gs_tls_ensure(const char *dir, const char *const *extra_names, size_t nextra, struct gs_tls *out);
void gs_tls_free(struct gs_tls *t);

#endif
