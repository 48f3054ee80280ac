/* Streams finished where a thread's storage is already gone: in an atexit handler (a logger
 * flushing at exit) and in a thread-key destructor (a per-thread stream). Each deflates in the
 * thread first, so that the thread's working memory exists and is torn down before the
 * finish. Writes the two gzip streams to argv[1] and argv[2]; the test inflates them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define LEN 100000
static unsigned char input[LEN];

struct job {
    z_stream s;
    unsigned char out[LEN + 1024];
    const char *path;
};

static void start(struct job *job, const char *path) {
    memset(&job->s, 0, sizeof job->s);
    job->path = path;
    if (deflateInit2(&job->s, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK) exit(2);
    job->s.next_in = input;
    job->s.avail_in = LEN;
    job->s.next_out = job->out;
    job->s.avail_out = sizeof job->out;
    if (deflate(&job->s, Z_NO_FLUSH) != Z_OK) exit(3);
}

static void finish(struct job *job) {
    int ret = deflate(&job->s, Z_FINISH);
    int end = deflateEnd(&job->s);
    if (ret != Z_STREAM_END || end != Z_OK) {
        fprintf(stderr, "%s: deflate(Z_FINISH) = %d, deflateEnd = %d\n", job->path, ret, end);
        _exit(4);
    }
    FILE *f = fopen(job->path, "wb");
    if (!f || fwrite(job->out, 1, job->s.total_out, f) != job->s.total_out || fclose(f)) _exit(5);
}

static struct job at_exit_job, key_job;
static pthread_key_t key;

static void at_exit(void) { finish(&at_exit_job); }
static void key_gone(void *job) { finish(job); }

static void *thread(void *path) {
    start(&key_job, path);
    pthread_setspecific(key, &key_job);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) return 1;
    for (int i = 0; i < LEN; i++) input[i] = "hello world "[i % 12] + (i / 5000);
    pthread_key_create(&key, key_gone);
    pthread_t t;
    if (pthread_create(&t, NULL, thread, argv[2]) || pthread_join(t, NULL)) return 6;
    start(&at_exit_job, argv[1]);
    atexit(at_exit);
    return 0;
}
