/*
 * curlfd.c - see curlfd.h.
 */
#include "control/curlfd.h"

#include <fcntl.h>

int gs_curl_sockopt_cloexec(void *arg, curl_socket_t fd, curlsocktype purpose)
{
    (void)arg, (void)purpose;
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0) fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    return CURL_SOCKOPT_OK;
}
