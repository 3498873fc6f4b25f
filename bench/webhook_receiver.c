/* Webhook receiver for `make bench` (webhook_deliveries_per_s): answers every POST with 204 at once,
 * after reading its body, and nothing else. Same threading as bench/bare_mhd.c. */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state) {
    (void)cls; (void)url; (void)method; (void)version; (void)upload;
    static int marker;
    if (*state == NULL) { *state = &marker; return MHD_YES; }
    if (*upload_size != 0) { *upload_size = 0; return MHD_YES; }
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    return ret;
}

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 18090;
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)port,
                                            NULL, NULL, &handle, NULL,
                                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)2,
                                            MHD_OPTION_CONNECTION_LIMIT, (unsigned int)1000, MHD_OPTION_END);
    if (d == NULL) { fprintf(stderr, "webhook_receiver: cannot start\n"); return 1; }
    sigset_t set; int sig;
    sigemptyset(&set); sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    sigwait(&set, &sig);
    MHD_stop_daemon(d);
    return 0;
}
