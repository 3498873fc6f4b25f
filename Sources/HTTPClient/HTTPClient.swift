// HTTPClient: the libcurl wrapper (outbound HTTPS: processors, Apple merchant validation).
