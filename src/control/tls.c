/*
 * tls.c - CA and serving certificate with GnuTLS; see tls.h.
 */
#include "control/tls.h"

#include "core/codec.h"
#include "core/log.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TEN_YEARS (10LL * 365 * 24 * 3600)

static int write_file(const char *dir, const char *name, const char *text, mode_t mode)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return GS_EIO;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    int err = off == len && fsync(fd) == 0 ? 0 : GS_EIO;
    close(fd);
    return err;
}

static int read_in(const char *dir, const char *name, char **out)
{
    char path[4200];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return gs_read_file(path, out, &len);
}

static char *dup_datum(gnutls_datum_t *d)
{
    char *s = malloc(d->size + 1);
    if (s) {
        memcpy(s, d->data, d->size);
        s[d->size] = 0;
    }
    gnutls_free(d->data);
    return s;
}

static int new_key(gnutls_x509_privkey_t *k)
{
    if (gnutls_x509_privkey_init(k) < 0) return GS_ENOMEM;
    return gnutls_x509_privkey_generate(*k, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0) < 0
               ? GS_EIO
               : 0;
}

/* Version, serial, validity, subject and key: what both certificates share. */
static int crt_base(gnutls_x509_crt_t c, gnutls_x509_privkey_t k, const char *dn)
{
    unsigned char serial[16];
    if (gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial) < 0) return GS_EIO;
    serial[0] &= 0x7f;
    time_t now = time(NULL);
    const char *err = NULL;
    if (gnutls_x509_crt_set_version(c, 3) < 0 || gnutls_x509_crt_set_serial(c, serial, sizeof serial) < 0 ||
        gnutls_x509_crt_set_activation_time(c, now - 3600) < 0 ||
        gnutls_x509_crt_set_expiration_time(c, (time_t)(now + TEN_YEARS)) < 0 ||
        gnutls_x509_crt_set_dn(c, dn, &err) < 0 || gnutls_x509_crt_set_key(c, k) < 0)
        return GS_EIO;
    unsigned char id[64];
    size_t idlen = sizeof id;
    if (gnutls_x509_crt_get_key_id(c, GNUTLS_KEYID_USE_SHA1, id, &idlen) < 0 ||
        gnutls_x509_crt_set_subject_key_id(c, id, idlen) < 0)
        return GS_EIO;
    return 0;
}

static int add_name(gnutls_x509_crt_t c, const char *name)
{
    unsigned char ip[16];
    if (inet_pton(AF_INET, name, ip) == 1)
        return gnutls_x509_crt_set_subject_alt_name(c, GNUTLS_SAN_IPADDRESS, ip, 4, GNUTLS_FSAN_APPEND);
    if (inet_pton(AF_INET6, name, ip) == 1)
        return gnutls_x509_crt_set_subject_alt_name(c, GNUTLS_SAN_IPADDRESS, ip, 16, GNUTLS_FSAN_APPEND);
    return gnutls_x509_crt_set_subject_alt_name(c, GNUTLS_SAN_DNSNAME, name, (unsigned)strlen(name),
                                                GNUTLS_FSAN_APPEND);
}

static int export_crt(gnutls_x509_crt_t c, char **out)
{
    gnutls_datum_t d;
    if (gnutls_x509_crt_export2(c, GNUTLS_X509_FMT_PEM, &d) < 0) return GS_EIO;
    return (*out = dup_datum(&d)) ? 0 : GS_ENOMEM;
}

static int export_key(gnutls_x509_privkey_t k, char **out)
{
    gnutls_datum_t d;
    if (gnutls_x509_privkey_export2(k, GNUTLS_X509_FMT_PEM, &d) < 0) return GS_EIO;
    return (*out = dup_datum(&d)) ? 0 : GS_ENOMEM;
}

static int make_ca(gnutls_x509_crt_t ca, gnutls_x509_privkey_t cak)
{
    int err = crt_base(ca, cak, "CN=gpusched-ca,O=gpusched");
    if (!err && (gnutls_x509_crt_set_basic_constraints(ca, 1, -1) < 0 ||
                 gnutls_x509_crt_set_key_usage(ca, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN |
                                                       GNUTLS_KEY_DIGITAL_SIGNATURE) < 0 ||
                 gnutls_x509_crt_sign2(ca, ca, cak, GNUTLS_DIG_SHA256, 0) < 0))
        err = GS_EIO;
    return err;
}

static int make_server(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, gnutls_x509_crt_t ca,
                       gnutls_x509_privkey_t cak, const char *const *extra, size_t nextra)
{
    int err = crt_base(crt, key, "CN=gpusched,O=gpusched");
    if (err) return err;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    const char *names[] = {"127.0.0.1", "::1", "localhost", host};
    for (size_t i = 0; i < 4 && !err; i++)
        if (names[i][0] && add_name(crt, names[i]) < 0) err = GS_EIO;
    for (size_t i = 0; i < nextra && !err; i++)
        if (add_name(crt, extra[i]) < 0) err = GS_EIO;
    unsigned char id[64];
    size_t idlen = sizeof id;
    if (!err && (gnutls_x509_crt_set_basic_constraints(crt, 0, -1) < 0 ||
                 gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE | GNUTLS_KEY_KEY_ENCIPHERMENT) < 0 ||
                 gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0) < 0 ||
                 gnutls_x509_crt_get_subject_key_id(ca, id, &idlen, NULL) < 0 ||
                 gnutls_x509_crt_set_authority_key_id(crt, id, idlen) < 0 ||
                 gnutls_x509_crt_sign2(crt, ca, cak, GNUTLS_DIG_SHA256, 0) < 0))
        err = GS_EIO;
    return err;
}

static int generate(const char *dir, const char *const *extra, size_t nextra, struct gs_tls *t)
{
    gnutls_x509_privkey_t cak = NULL, key = NULL;
    gnutls_x509_crt_t ca = NULL, crt = NULL;
    char *ca_key_pem = NULL;
    int err = new_key(&cak);
    if (!err) err = new_key(&key);
    if (!err && (gnutls_x509_crt_init(&ca) < 0 || gnutls_x509_crt_init(&crt) < 0)) err = GS_ENOMEM;
    if (!err) err = make_ca(ca, cak);
    if (!err) err = make_server(crt, key, ca, cak, extra, nextra);
    if (!err) err = export_crt(ca, &t->ca_pem);
    if (!err) err = export_crt(crt, &t->cert_pem);
    if (!err) err = export_key(key, &t->key_pem);
    if (!err) err = export_key(cak, &ca_key_pem);
    if (!err) err = write_file(dir, "ca.key", ca_key_pem, 0600);
    if (!err) err = write_file(dir, "server.key", t->key_pem, 0600);
    if (!err) err = write_file(dir, "server.crt", t->cert_pem, 0644);
    if (!err) err = write_file(dir, "ca.crt", t->ca_pem, 0644); /* last: its presence means "all written" */
    free(ca_key_pem);
    if (ca) gnutls_x509_crt_deinit(ca);
    if (crt) gnutls_x509_crt_deinit(crt);
    if (cak) gnutls_x509_privkey_deinit(cak);
    if (key) gnutls_x509_privkey_deinit(key);
    return err;
}

int gs_tls_ensure(const char *dir, const char *const *extra_names, size_t nextra, struct gs_tls *out)
{
    memset(out, 0, sizeof *out);
    int err = read_in(dir, "ca.crt", &out->ca_pem);
    if (!err) err = read_in(dir, "server.crt", &out->cert_pem);
    if (!err) err = read_in(dir, "server.key", &out->key_pem);
    if (err == GS_ENOENT) {
        gs_tls_free(out);
        err = generate(dir, extra_names, nextra, out);
        if (!err) gs_log(GS_LOG_INFO, "tls: created CA and serving certificate", "dir", dir, NULL);
    }
    if (err) gs_tls_free(out);
    return err;
}

void gs_tls_free(struct gs_tls *t)
{
    free(t->ca_pem);
    free(t->cert_pem);
    free(t->key_pem);
    memset(t, 0, sizeof *t);
}
