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
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
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

/* Starts a daemon with an internal epoll thread pool and suspend/resume that listens on nothing:
 * Tender's edge accepts connections, frames each request itself and hands MHD one end of a socket
 * pair per connection (MHD_add_connection). */
static inline struct MHD_Daemon *
tender_mhd_start_unbound(struct tender_mhd_limits limits,
                         MHD_AccessHandlerCallback handler, void *handler_cls,
                         MHD_RequestCompletedCallback completed, void *completed_cls)
{
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME
        | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handler, handler_cls,
        MHD_OPTION_THREAD_POOL_SIZE, limits.thread_pool_size,
        MHD_OPTION_CONNECTION_LIMIT, limits.connection_limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits.per_ip_connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, limits.connection_timeout_seconds,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits.connection_memory_limit_bytes,
        MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
        MHD_OPTION_END);
}

/* The MHD-side socket of a connection; -1 if unknown. */
static inline int tender_mhd_connection_fd(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/* ---- The edge: sockets and epoll (Glibc's Swift module does not expose epoll, eventfd or accept4). ---- */

/* A non-blocking listening TCP socket on host:port (IPv4 or IPv6 literal). Returns the fd, or -1 with
 * *error = 1 for a bad host and 2 for a socket/bind/listen failure. *bound_port receives the port. */
static inline int tender_edge_listen(const char *host, uint16_t port, int backlog, uint16_t *bound_port, int *error)
{
    struct sockaddr_storage storage;
    socklen_t length;
    memset(&storage, 0, sizeof storage);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&storage;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&storage;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        length = sizeof *v4;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        length = sizeof *v6;
    } else {
        *error = -1; /* not a numeric address */
        return -1;
    }
    int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) { *error = errno; return -1; }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (storage.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&storage, length) != 0 || listen(fd, backlog) != 0) {
        int saved = errno; /* the errno of bind or listen, before close can change it */
        close(fd);
        *error = saved;
        return -1;
    }
    length = sizeof storage;
    if (getsockname(fd, (struct sockaddr *)&storage, &length) == 0) {
        *bound_port = ntohs(storage.ss_family == AF_INET6 ? v6->sin6_port : v4->sin_port);
    }
    *error = 0;
    return fd;
}

/* accept4 with NONBLOCK|CLOEXEC and TCP_NODELAY; -1 when nothing is waiting (or on error). */
static inline int tender_edge_accept(int listener, struct sockaddr_storage *peer, socklen_t *peer_length)
{
    *peer_length = sizeof *peer;
    int fd = accept4(listener, (struct sockaddr *)peer, peer_length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

/* The peer's numeric address of an accepted socket, NUL-terminated; 0 on success. */
static inline int tender_edge_peer_text(const struct sockaddr_storage *peer, char *buffer, socklen_t length)
{
    const void *raw = NULL;
    if (peer->ss_family == AF_INET) raw = &((const struct sockaddr_in *)peer)->sin_addr;
    else if (peer->ss_family == AF_INET6) raw = &((const struct sockaddr_in6 *)peer)->sin6_addr;
    else return -1;
    return inet_ntop(peer->ss_family, raw, buffer, length) == NULL ? -1 : 0;
}

/* A connected, non-blocking AF_UNIX stream pair whose buffers are capped at buffer_bytes each way. */
static inline int tender_edge_socketpair(int fds[2], int buffer_bytes)
{
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) return -1;
    for (int i = 0; i < 2; i++) {
        setsockopt(fds[i], SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
        setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof buffer_bytes);
    }
    return 0;
}

/* Hands one end of a pair to MHD, as if it were the accepted peer socket (the peer address keeps
 * per-address limits and access logs true). Returns 0 on success; MHD closes the socket on failure. */
static inline int tender_mhd_add_connection(struct MHD_Daemon *daemon, int fd, const struct sockaddr_storage *peer,
                                            socklen_t peer_length)
{
    return MHD_add_connection(daemon, fd, (const struct sockaddr *)peer, peer_length) == MHD_YES ? 0 : -1;
}

static inline int tender_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/* op: 1 add, 2 delete, 3 modify (EPOLL_CTL_*); events: a mask of tender_epoll_* below. */
static inline int tender_epoll_ctl(int epoll, int op, int fd, uint32_t events, uint64_t data)
{
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.events = events;
    event.data.u64 = data;
    return epoll_ctl(epoll, op, fd, &event);
}

static const uint32_t tender_epoll_in = EPOLLIN;
static const uint32_t tender_epoll_out = EPOLLOUT;
static const uint32_t tender_epoll_err = EPOLLERR | EPOLLHUP;
static const uint32_t tender_epoll_exclusive = EPOLLEXCLUSIVE;

/* Waits for up to max events; copies each one's data and mask out (epoll_event is packed on x86-64). */
static inline int tender_epoll_wait(int epoll, uint64_t *datas, uint32_t *masks, int max, int timeout_milliseconds)
{
    struct epoll_event events[256];
    if (max > 256) max = 256;
    int count = epoll_wait(epoll, events, max, timeout_milliseconds);
    for (int i = 0; i < count; i++) {
        datas[i] = events[i].data.u64;
        masks[i] = events[i].events;
    }
    return count;
}

static inline int tender_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
static inline void tender_eventfd_signal(int fd) { uint64_t one = 1; ssize_t ignored = write(fd, &one, sizeof one); (void)ignored; }
static inline void tender_eventfd_clear(int fd) { uint64_t value; ssize_t ignored = read(fd, &value, sizeof value); (void)ignored; }

/* The last errno (EAGAIN and EINTR are the ones the edge tells apart). */
static inline int tender_errno(void) { return errno; }
static inline int tender_errno_would_block(int code) { return code == EAGAIN || code == EWOULDBLOCK; }

/* Raises the soft open-file limit to the hard one: every edge connection holds three descriptors. */
static inline void tender_raise_file_limit(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
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
