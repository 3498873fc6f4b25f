#ifndef TENDER_CCURL_SHIM_H
#define TENDER_CCURL_SHIM_H
#include <curl/curl.h>
#endif
