#ifndef TENDER_CCURL_SHIM_H
#define TENDER_CCURL_SHIM_H
#include <curl/curl.h>
#include <string.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call:
// these typed wrappers pin the argument type per option family.

static inline CURLcode tender_curl_global_init(void) {
    return curl_global_init(CURL_GLOBAL_DEFAULT);
}

static inline CURLcode tender_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tender_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tender_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tender_curl_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tender_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

// copy != 0 lets libcurl keep its own copy (public material such as a certificate);
// copy == 0 keeps only the pointer, so secrets stay in memory the caller zeroes.
static inline CURLcode tender_curl_setopt_blob(CURL *handle, CURLoption option,
                                               const void *data, size_t length, int copy) {
    struct curl_blob blob;
    blob.data = (void *)data;
    blob.len = length;
    blob.flags = copy ? CURL_BLOB_COPY : CURL_BLOB_NOCOPY;
    return curl_easy_setopt(handle, option, &blob);
}

typedef size_t (*tender_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode tender_curl_setopt_data_callback(CURL *handle, CURLoption option,
                                                        tender_curl_data_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

typedef curl_socket_t (*tender_curl_opensocket_callback)(void *context, curlsocktype purpose,
                                                         struct curl_sockaddr *address);

static inline CURLcode tender_curl_setopt_opensocket_callback(CURL *handle,
                                                              tender_curl_opensocket_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, callback);
}

static inline CURLcode tender_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode tender_curl_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline void tender_zero_memory(void *data, size_t length) {
    explicit_bzero(data, length);
}

#endif
