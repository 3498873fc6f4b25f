#ifndef TENDER_COPENSSL_SHIM_H
#define TENDER_COPENSSL_SHIM_H
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pkcs7.h>
#include <openssl/cms.h>
#include <openssl/ec.h>
#include <openssl/rsa.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>

/* Stack helpers: OpenSSL's sk_* accessors are function-like macros Swift cannot import. */
static inline int tender_sk_X509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *tender_sk_X509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
static inline STACK_OF(X509) *tender_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int tender_sk_X509_push(STACK_OF(X509) *sk, X509 *x) { return sk_X509_push(sk, x); }
static inline void tender_sk_X509_free(STACK_OF(X509) *sk) { sk_X509_free(sk); }
static inline void tender_sk_X509_pop_free(STACK_OF(X509) *sk) { sk_X509_pop_free(sk, X509_free); }
static inline int tender_sk_CMS_SignerInfo_num(const STACK_OF(CMS_SignerInfo) *sk) { return sk_CMS_SignerInfo_num(sk); }
static inline CMS_SignerInfo *tender_sk_CMS_SignerInfo_value(const STACK_OF(CMS_SignerInfo) *sk, int i) { return sk_CMS_SignerInfo_value(sk, i); }
static inline unsigned long tender_xn_flag_rfc2253(void) { return XN_FLAG_RFC2253; }
static inline void tender_openssl_free(void *p) { OPENSSL_free(p); }
/* P-256 fast paths for Apple Pay token verification. OpenSSL 3.0's EVP layer resolves providers by name
 * on every call (locks and string compares dominate a token's cost), so the per-token hot path uses the
 * EC_KEY functions directly on keys converted once. They are deprecated in 3.0 but supported through 3.x;
 * the pragmas keep the deprecation out of the importing Swift module. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* An EC_KEY view of a P-256 EVP_PKEY (NULL for other keys); free with tender_ec_key_free. */
static inline EC_KEY *tender_ec_key_p256_from_pkey(EVP_PKEY *pkey) {
    EC_KEY *key = EVP_PKEY_get1_EC_KEY(pkey);
    if (key == NULL) return NULL;
    const EC_GROUP *group = EC_KEY_get0_group(key);
    if (group == NULL || EC_GROUP_get_curve_name(group) != NID_X9_62_prime256v1) { EC_KEY_free(key); return NULL; }
    return key;
}
static inline void tender_ec_key_free(EC_KEY *key) { EC_KEY_free(key); }
/* ECDH with `priv` and the uncompressed or compressed point `point` (rejected unless on the curve);
 * writes the 32-byte x coordinate. Returns 1 on success. */
static inline int tender_ecdh_p256(const EC_KEY *priv, const unsigned char *point, size_t point_len, unsigned char *out32) {
    const EC_GROUP *group = EC_KEY_get0_group(priv);
    if (group == NULL || EC_KEY_get0_private_key(priv) == NULL) return 0;
    EC_POINT *peer = EC_POINT_new(group);
    if (peer == NULL) return 0;
    /* oct2point refuses points off the curve (EC_POINT_set_affine_coordinates checks it). */
    int ok = EC_POINT_oct2point(group, peer, point, point_len, NULL) == 1
        && EC_POINT_is_at_infinity(group, peer) == 0
        && EC_POINT_is_on_curve(group, peer, NULL) == 1
        && ECDH_compute_key(out32, 32, peer, priv, NULL) == 32;
    EC_POINT_free(peer);
    return ok;
}
/* ECDSA verification of a DER signature over a 32-byte SHA-256 digest. Returns 1 when valid. */
static inline int tender_ecdsa_verify_sha256(const EC_KEY *pub, const unsigned char *digest32, const unsigned char *sig, int sig_len) {
    return ECDSA_verify(0, digest32, 32, sig, sig_len, (EC_KEY *)pub) == 1;
}
/* One-shot SHA-256 through the low-level functions: OpenSSL 3.0's SHA256() goes through EVP_Q_digest, which
 * fetches the digest by name (a lock and string compares) on every call, about as costly as hashing a
 * certificate. Returns 1 on success. */
static inline int tender_sha256(const unsigned char *data, size_t len, unsigned char *out32) {
    SHA256_CTX ctx;
    int ok = SHA256_Init(&ctx) == 1 && SHA256_Update(&ctx, data, len) == 1 && SHA256_Final(out32, &ctx) == 1;
    OPENSSL_cleanse(&ctx, sizeof ctx);
    return ok;
}
#pragma GCC diagnostic pop
#endif
