#ifndef TENDER_CLIBPQ_SHIM_H
#define TENDER_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
