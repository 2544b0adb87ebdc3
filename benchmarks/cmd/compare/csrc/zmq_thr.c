/*
 * zmq_thr: the ZeroMQ PUSH/PULL peer of cmd/compare, written in C against
 * libzmq as its own perf/local_thr.cpp and remote_thr.cpp are, so that the
 * comparison has ZeroMQ without Go's cgo calls and pebbe/zmq4's copies in
 * between. cmd/compare builds it with gcc -O2 ... -lzmq and runs it as
 * both sides of a run, speaking the harness's protocol on stdout:
 *
 *   zmq_thr server SIZE HWM WARMUP_US MEASURE_US
 *       binds a PULL socket to tcp://127.0.0.1:*, prints "ADDR <endpoint>",
 *       receives, times and prints "RESULT {json}" like the Go receivers.
 *   zmq_thr client SIZE HWM ENDPOINT
 *       connects a PUSH socket and sends SIZE-byte messages until killed.
 *
 * Every message starts with its sequence number (8 bytes, little endian);
 * the receiver checks it, so a lost or reordered message fails the run.
 * The receiver reuses one zmq_msg_t (zmq_msg_recv, no copy out, as
 * local_thr); the sender uses zmq_send, which copies the buffer into a new
 * message (as remote_thr's zmq_msg_init_size + memcpy would).
 *
 * The measured window works as the Go meter's: the first message starts a
 * timer thread that flips a phase after the warm-up and again after the
 * measured time; the receiving loop reads the phase (one relaxed atomic
 * load) after every message and takes the time and the count when it
 * changed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

static void die(const char *what) {
    fprintf(stderr, "zmq_thr: %s: %s\n", what, zmq_strerror(zmq_errno()));
    exit(1);
}

static long long arg(const char *s, const char *name) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0) {
        fprintf(stderr, "zmq_thr: bad %s \"%s\"\n", name, s);
        exit(2);
    }
    return v;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_us(long long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static _Atomic int phase; /* 0 warming up, 1 measuring, 2 over */
static long long warmup_us, measure_us;

static void *timer(void *unused) {
    (void)unused;
    sleep_us(warmup_us);
    atomic_store_explicit(&phase, 1, memory_order_relaxed);
    sleep_us(measure_us);
    atomic_store_explicit(&phase, 2, memory_order_relaxed);
    return NULL;
}

static uint64_t get_seq(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put_seq(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (unsigned char)v;
}

static void *socket_with_hwm(void *ctx, int type, int hwm) {
    void *s = zmq_socket(ctx, type);
    if (s == NULL)
        die("zmq_socket");
    if (zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0)
        die("ZMQ_SNDHWM");
    if (zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0)
        die("ZMQ_RCVHWM");
    return s;
}

static int server(void *ctx, size_t size, int hwm) {
    void *s = socket_with_hwm(ctx, ZMQ_PULL, hwm);
    if (zmq_bind(s, "tcp://127.0.0.1:*") != 0)
        die("zmq_bind");
    char ep[256];
    size_t len = sizeof ep;
    if (zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len) != 0)
        die("ZMQ_LAST_ENDPOINT");
    printf("ADDR %s\n", ep);
    fflush(stdout);

    zmq_msg_t msg;
    if (zmq_msg_init(&msg) != 0)
        die("zmq_msg_init");
    uint64_t seq = 0, c0 = 0, c1 = 0;
    double t0 = 0, t1 = 0;
    int local = 0;
    pthread_t th;
    for (;;) {
        if (zmq_msg_recv(&msg, s, 0) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            die("zmq_msg_recv");
        }
        size_t n = zmq_msg_size(&msg);
        if (n != size) {
            fprintf(stderr, "zmq_thr: message %" PRIu64 " has %zu bytes, want %zu\n", seq, n, size);
            return 1;
        }
        uint64_t got = get_seq(zmq_msg_data(&msg));
        if (got != seq) {
            fprintf(stderr, "zmq_thr: message %" PRIu64 " carries sequence number %" PRIu64 ": messages were lost or reordered\n", seq, got);
            return 1;
        }
        seq++;
        if (seq == 1 && pthread_create(&th, NULL, timer, NULL) != 0) {
            fprintf(stderr, "zmq_thr: pthread_create failed\n");
            return 1;
        }
        int p = atomic_load_explicit(&phase, memory_order_relaxed);
        if (p == local)
            continue;
        double t = now();
        if (local == 0) {
            t0 = t, c0 = seq, local = 1;
        }
        if (p == 2) {
            t1 = t, c1 = seq;
            break;
        }
    }
    if (c1 <= c0 || t1 <= t0) {
        fprintf(stderr, "zmq_thr: nothing arrived during the measured window\n");
        return 1;
    }
    printf("RESULT {\"size\":%zu,\"messages\":%" PRIu64 ",\"seconds\":%.9f}\n", size, c1 - c0, t1 - t0);
    fflush(stdout);
    /* The parent kills the sender; no need to drain or close. */
    _exit(0);
}

static int client(void *ctx, size_t size, int hwm, const char *ep) {
    void *s = socket_with_hwm(ctx, ZMQ_PUSH, hwm);
    if (zmq_connect(s, ep) != 0)
        die("zmq_connect");
    unsigned char *buf = malloc(size);
    if (buf == NULL) {
        fprintf(stderr, "zmq_thr: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < size; i++)
        buf[i] = (unsigned char)(i * 7 + 1); /* every byte written once */
    for (uint64_t seq = 0;; seq++) {
        put_seq(buf, seq);
        while (zmq_send(s, buf, size, 0) < 0) {
            if (zmq_errno() != EINTR)
                die("zmq_send");
        }
    }
}

int main(int argc, char **argv) {
    if (argc >= 6 && strcmp(argv[1], "server") == 0) {
        size_t size = (size_t)arg(argv[2], "size");
        int hwm = (int)arg(argv[3], "hwm");
        warmup_us = arg(argv[4], "warm-up");
        measure_us = arg(argv[5], "measured time");
        if (size < 8) {
            fprintf(stderr, "zmq_thr: size below 8 bytes: messages carry a sequence number\n");
            return 2;
        }
        return server(zmq_ctx_new(), size, hwm);
    }
    if (argc >= 5 && strcmp(argv[1], "client") == 0) {
        size_t size = (size_t)arg(argv[2], "size");
        int hwm = (int)arg(argv[3], "hwm");
        if (size < 8) {
            fprintf(stderr, "zmq_thr: size below 8 bytes: messages carry a sequence number\n");
            return 2;
        }
        return client(zmq_ctx_new(), size, hwm, argv[4]);
    }
    fprintf(stderr, "usage: zmq_thr server SIZE HWM WARMUP_US MEASURE_US\n"
                    "       zmq_thr client SIZE HWM ENDPOINT\n");
    return 2;
}
