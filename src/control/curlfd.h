/*
 * curlfd.h - libcurl's sockets close-on-exec. libcurl opens them without
 * SOCK_CLOEXEC; any process the agent or the server starts would inherit
 * live connections to the API server. Every easy handle sets
 * CURLOPT_SOCKOPTFUNCTION to this (client.c, api_logs.c, agent/fetch.c).
 */
#ifndef GS_CONTROL_CURLFD_H
#define GS_CONTROL_CURLFD_H

#include <curl/curl.h>

/* Sets FD_CLOEXEC on fd; always CURL_SOCKOPT_OK (a failure changes nothing for the transfer). */
int gs_curl_sockopt_cloexec(void *arg, curl_socket_t fd, curlsocktype purpose);

#endif
