#ifndef TENDER_CLIBPQ_SHIM_H
#define TENDER_CLIBPQ_SHIM_H
#include <libpq-fe.h>

static void tender_pq_drop_notice(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

/* Server NOTICEs ("relation already exists, skipping") would otherwise go to stderr unformatted. */
static inline void tender_pq_silence_notices(PGconn *conn) {
    PQsetNoticeProcessor(conn, tender_pq_drop_notice, NULL);
}
#endif
