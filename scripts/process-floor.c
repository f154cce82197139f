/* The floor for scripts/process-floor.py: the least a process can do to sample
 * energy counters at a fixed rate. One timerfd at absolute deadlines, and at each
 * tick one pread of every file named and a parse of its number; nothing else (no
 * wrap correction, no output, no threads). Usage:
 *     process-floor [-t] HZ SECONDS FILE...
 * With -t the same loop runs on a second thread while the first waits for it in
 * pthread_join, as quietwatt's sampler does: a multi-threaded process shares its
 * file table, so each system call on a descriptor takes and drops a reference
 * that a single-threaded one skips, and the scheduler places two threads. What
 * -t adds over the plain floor is what threads cost, apart from quietwatt's code.
 * It prints the samples taken and the sum of the last readings (so that the
 * reads and the parse cannot be optimised away). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 64

static int argc_, status;
static char **argv_;

static int run(int argc, char **argv);

static void *thread_main(void *unused) {
    (void)unused;
    status = run(argc_, argv_);
    return NULL;
}

int main(int argc, char **argv) {
    int threaded = argc > 1 && argv[1][0] == '-' && argv[1][1] == 't' && !argv[1][2];
    if (threaded) {
        argc--;
        argv++;
    }
    if (argc < 4 || argc - 3 > MAX_FILES) {
        fprintf(stderr, "usage: %s [-t] HZ SECONDS FILE...\n", argv[0]);
        return 2;
    }
    if (!threaded)
        return run(argc, argv);
    pthread_t t;
    argc_ = argc;
    argv_ = argv;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0) {
        perror("pthread_create");
        return 1;
    }
    pthread_join(t, NULL);
    return status;
}

static int run(int argc, char **argv) {
    double hz = atof(argv[1]), secs = atof(argv[2]);
    int n = argc - 3, fds[MAX_FILES];
    for (int i = 0; i < n; i++) {
        fds[i] = open(argv[3 + i], O_RDONLY | O_CLOEXEC);
        if (fds[i] < 0) {
            perror(argv[3 + i]);
            return 1;
        }
    }
    int64_t period = (int64_t)(1e9 / hz);
    int64_t ticks = (int64_t)(secs * hz);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (tfd < 0) {
        perror("timerfd_create");
        return 1;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    struct itimerspec its = {0};
    int64_t first = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec + period;
    its.it_value.tv_sec = first / 1000000000;
    its.it_value.tv_nsec = first % 1000000000;
    its.it_interval.tv_nsec = period % 1000000000;
    its.it_interval.tv_sec = period / 1000000000;
    if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        perror("timerfd_settime");
        return 1;
    }
    uint64_t sum = 0, samples = 0, expirations;
    char buf[32];
    for (int64_t done = 0; done < ticks;) {
        if (read(tfd, &expirations, sizeof expirations) != sizeof expirations)
            continue;
        done += (int64_t)expirations;
        sum = 0;
        for (int i = 0; i < n; i++) {
            ssize_t r = pread(fds[i], buf, sizeof buf - 1, 0);
            if (r <= 0) {
                perror(argv[3 + i]);
                return 1;
            }
            buf[r] = 0;
            sum += strtoull(buf, NULL, 10);
        }
        samples++;
    }
    printf("%llu samples, last sum %llu\n", (unsigned long long)samples,
           (unsigned long long)sum);
    fflush(stdout);
    return 0;
}
