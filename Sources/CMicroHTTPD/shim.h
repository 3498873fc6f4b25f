#ifndef TENDER_CMICROHTTPD_SHIM_H
#define TENDER_CMICROHTTPD_SHIM_H
#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

/* Swift cannot call C variadic functions, so the variadic MHD entry points are wrapped here
 * with fixed, correctly typed arguments (MHD reads each option with va_arg of its exact C type). */

/* Limits handed to MHD_start_daemon; one field per MHD option we set. */
struct tender_mhd_limits {
    unsigned int thread_pool_size;
    unsigned int connection_limit;
    unsigned int per_ip_connection_limit;
    unsigned int connection_timeout_seconds;
    size_t connection_memory_limit_bytes;
};

/* Error codes of tender_mhd_start besides a NULL daemon. */
enum {
    TENDER_MHD_OK = 0,
    TENDER_MHD_BAD_HOST = 1,
    TENDER_MHD_START_FAILED = 2
};

/* Starts a daemon with an internal epoll thread pool and suspend/resume, bound to host:port
 * (an IPv4 or IPv6 literal). Returns NULL and sets *error on failure. */
static inline struct MHD_Daemon *
tender_mhd_start(const char *host, uint16_t port, struct tender_mhd_limits limits,
                 MHD_AccessHandlerCallback handler, void *handler_cls,
                 MHD_RequestCompletedCallback completed, void *completed_cls,
                 int *error)
{
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    const struct sockaddr *address;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    memset(&v4, 0, sizeof v4);
    memset(&v6, 0, sizeof v6);
    if (inet_pton(AF_INET, host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(port);
        address = (const struct sockaddr *)&v4;
    } else if (inet_pton(AF_INET6, host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(port);
        address = (const struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    } else {
        *error = TENDER_MHD_BAD_HOST;
        return NULL;
    }
    struct MHD_Daemon *daemon = MHD_start_daemon(
        flags, port, NULL, NULL, handler, handler_cls,
        MHD_OPTION_SOCK_ADDR, address,
        MHD_OPTION_THREAD_POOL_SIZE, limits.thread_pool_size,
        MHD_OPTION_CONNECTION_LIMIT, limits.connection_limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits.per_ip_connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, limits.connection_timeout_seconds,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits.connection_memory_limit_bytes,
        MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
        MHD_OPTION_END);
    *error = daemon == NULL ? TENDER_MHD_START_FAILED : TENDER_MHD_OK;
    return daemon;
}

/* The port the daemon really listens on (useful after binding port 0); 0 if unknown. */
static inline uint16_t tender_mhd_bound_port(struct MHD_Daemon *daemon)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/* Writes the peer's numeric address into buffer (NUL-terminated); returns 0 on success. */
static inline int tender_mhd_client_address(struct MHD_Connection *connection, char *buffer, socklen_t length)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || length == 0) return -1;
    const struct sockaddr *address = info->client_addr;
    const void *raw = NULL;
    if (address->sa_family == AF_INET) raw = &((const struct sockaddr_in *)address)->sin_addr;
    else if (address->sa_family == AF_INET6) raw = &((const struct sockaddr_in6 *)address)->sin6_addr;
    else return -1;
    return inet_ntop(address->sa_family, raw, buffer, length) == NULL ? -1 : 0;
}

#endif
