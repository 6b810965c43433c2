/* bench/tls_handshakes.c — handshakes per second over TLS 1.3, one
 * connection at a time, as bench/tls measures them (issue 14).
 *
 *   tls_handshakes PORT PATH SECONDS full|resume
 *
 * Each connection: TCP connect to 127.0.0.1:PORT, TLS 1.3 handshake, one
 * `GET PATH` with `Connection: close`, the whole answer read to the
 * server's close (the session tickets arrive with it), then closed with a
 * reset (no TIME_WAIT piling up over tens of thousands of connections).
 * `resume` offers, on each connection, the session of the one before —
 * the newest ticket, which is what a browser does and what a stateful
 * server needs: with `ssl_session_tickets off` a TLS 1.3 ticket names an
 * entry of the server's session cache, and both OpenSSL and rustls take
 * that entry out when it is used (single use), so `openssl s_time
 * -reuse`, which offers the first session again and again, resumes only
 * once there. `full` offers none.
 *
 * Prints one line: `N connections, R resumed, F failed, S seconds`.
 * Built by bench/tls with `cc -O2 ... -lssl -lcrypto`.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* One connection; returns 1 when the answer was read, 0 on failure. The
 * session to offer next is left in *sess (replaced when resuming). */
static int one(SSL_CTX *ctx, int port, const char *req, int resume, SSL_SESSION **sess,
               int *resumed)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0), ok = 0, on = 1;
    struct linger lg = {1, 0};
    char buf[16384];
    if (fd < 0)
        return 0;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return 0;
    }
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, "localhost");
    if (resume && *sess)
        SSL_set_session(ssl, *sess);
    if (SSL_connect(ssl) == 1 && SSL_write(ssl, req, strlen(req)) > 0) {
        int n;
        while ((n = SSL_read(ssl, buf, sizeof buf)) > 0)
            ok = 1;
        *resumed += SSL_session_reused(ssl);
        if (resume) {
            SSL_SESSION *s = SSL_get1_session(ssl);
            if (s) {
                if (*sess)
                    SSL_SESSION_free(*sess);
                *sess = s;
            }
        }
    }
    /* Freed without a shutdown sent, OpenSSL would mark the session not
     * resumable (ssl_clear_bad_session); s_time and Python mark it so too. */
    SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_get_shutdown(ssl));
    SSL_free(ssl);
    close(fd);
    ERR_clear_error();
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s PORT PATH SECONDS full|resume\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), resume = !strcmp(argv[4], "resume");
    double secs = atof(argv[3]);
    char req[512];
    snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
             argv[2]);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL_SESSION *sess = NULL;
    long n = 0, failed = 0;
    int resumed = 0;
    double t0 = now(), t;
    while ((t = now()) - t0 < secs) {
        n++;
        if (!one(ctx, port, req, resume, &sess, &resumed))
            failed++;
    }
    printf("%ld connections, %d resumed, %ld failed, %.3f seconds\n", n, resumed, failed, t - t0);
    return 0;
}
