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
#endif
