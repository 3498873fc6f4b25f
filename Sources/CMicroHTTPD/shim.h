#ifndef TENDER_CMICROHTTPD_SHIM_H
#define TENDER_CMICROHTTPD_SHIM_H
#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>
#endif
