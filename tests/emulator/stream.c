/* STREAM over DMA on the emulator, as swCandle measured it on one SW26010 core group: every
 * CPE takes blocks in turn and, for each, does one blocking DMA get per source, the
 * arithmetic on LDM, and one blocking DMA put. Copy is c = a (16 bytes per element as STREAM
 * counts), triad is a = b + s * c (24 bytes per element; computed in b's buffer so that two
 * 24 KiB blocks fit the LDM). Block sizes run from 8 bytes to 24 KiB; loops of at most 128
 * doubles run 2000 blocks per CPE, larger ones 200, as in the measurement.
 *
 * Time is the emulator's modelled time around spawn and join. First checks one pass of each
 * kernel over the whole arrays (exits 1 on a wrong value), then prints one line per block
 * size: "block_bytes copy_mb_s triad_mb_s". */
#include <stdio.h>
#include <stdlib.h>

#include <athread.h>
#include <slave.h>

#include "swflow_emu.h"
#include "swflow_slave.h"

#define CPES 64
/* Doubles per array: 8 MiB each, a slice per CPE; a CPE's blocks wrap around its slice. */
#define ELEMS (1L << 20)
#define MAX_BLOCK 3072
#define SCALAR 3.0

static double a[ELEMS] __attribute__((aligned(128)));
static double b[ELEMS] __attribute__((aligned(128)));
static double c[ELEMS] __attribute__((aligned(128)));

struct args {
    double *a, *b, *c;
    long n;     /* doubles per block */
    long iters; /* blocks per CPE */
};

static struct args args;

__thread_local struct args la;
__thread_local double x[MAX_BLOCK] __attribute__((aligned(128)));
__thread_local double y[MAX_BLOCK] __attribute__((aligned(128)));
__thread_local volatile int reply;

static void start(void *arg)
{
    reply = 0;
    swflow_emu_ldm_buffer(&la, sizeof la, "args");
    swflow_emu_ldm_buffer(x, sizeof x, "x");
    swflow_emu_ldm_buffer(y, sizeof y, "y");
    athread_get(PE_MODE, arg, &la, sizeof la, (void *)&reply, 0, 0, 0);
    swflow_emu_wait((const void *)&reply, 1, 1);
}

/* Offset of this CPE's block number `it` in an array. */
static long block(long it)
{
    long slice = ELEMS / CPES;
    return _MYID * slice + it % (slice / la.n) * la.n;
}

void slave_copy(void *arg)
{
    long it, i, at, n;
    int done = 1;
    start(arg);
    n = la.n;
    for (it = 0; it < la.iters; it++) {
        at = block(it);
        athread_get(PE_MODE, la.a + at, x, n * sizeof(double), (void *)&reply, 0, 0, 0);
        swflow_emu_wait((const void *)&reply, ++done, 1);
        /* Per element: a load, a store, two addresses, the loop's control. */
        SWFLOW_CHARGE(n, .load = 1, .store = 1, .integer = 4, .branch = 1);
        for (i = 0; i < n; i++)
            y[i] = x[i];
        athread_put(PE_MODE, y, la.c + at, n * sizeof(double), (void *)&reply, 0, 0);
        swflow_emu_wait((const void *)&reply, ++done, 1);
    }
}

void slave_triad(void *arg)
{
    long it, i, at, n;
    int done = 1;
    start(arg);
    n = la.n;
    for (it = 0; it < la.iters; it++) {
        at = block(it);
        athread_get(PE_MODE, la.b + at, x, n * sizeof(double), (void *)&reply, 0, 0, 0);
        swflow_emu_wait((const void *)&reply, ++done, 1);
        athread_get(PE_MODE, la.c + at, y, n * sizeof(double), (void *)&reply, 0, 0, 0);
        swflow_emu_wait((const void *)&reply, ++done, 1);
        /* Per element: two loads, a multiply and an add, a store, three addresses, the loop. */
        SWFLOW_CHARGE(n, .flops = 2, .fp = 2, .load = 2, .store = 1, .integer = 5, .branch = 1);
        for (i = 0; i < n; i++)
            x[i] = x[i] + SCALAR * y[i];
        athread_put(PE_MODE, x, la.a + at, n * sizeof(double), (void *)&reply, 0, 0);
        swflow_emu_wait((const void *)&reply, ++done, 1);
    }
}

/* Modelled MB/s of `bytes_per_elem` STREAM bytes per element over one launch of `kernel`. */
static double rate(void (*kernel)(void *), const char *name, double bytes_per_elem)
{
    double t0 = swflow_emu_seconds(), t;
    swflow_athread_spawn(name, kernel, &args, sizeof args);
    athread_join();
    t = swflow_emu_seconds() - t0;
    if (t <= 0.0) {
        printf("error: the emulator does not model time\n");
        exit(1);
    }
    return bytes_per_elem * (double)args.n * (double)args.iters * CPES / t / 1e6;
}

int main(void)
{
    static const long sizes[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3072};
    long i, k;
    int bad = 0;
    swflow_emu_main_region(a, sizeof a, "a");
    swflow_emu_main_region(b, sizeof b, "b");
    swflow_emu_main_region(c, sizeof c, "c");
    for (i = 0; i < ELEMS; i++) {
        a[i] = (double)(i % 1000);
        b[i] = 1.0;
        c[i] = 0.0;
    }
    args.a = a;
    args.b = b;
    args.c = c;
    athread_init();
    /* One pass of each kernel touches every element once. */
    args.n = 512;
    args.iters = ELEMS / CPES / 512;
    rate(SLAVE_FUN(copy), "copy", 16.0);
    rate(SLAVE_FUN(triad), "triad", 24.0);
    for (i = 0; i < ELEMS; i++)
        if (c[i] != (double)(i % 1000) || a[i] != 1.0 + SCALAR * (double)(i % 1000))
            bad = 1;
    if (bad) {
        printf("error: wrong values after one pass of copy and triad\n");
        return 1;
    }
    for (k = 0; k < (long)(sizeof sizes / sizeof *sizes); k++) {
        double copy, triad;
        args.n = sizes[k];
        args.iters = sizes[k] <= 128 ? 2000 : 200;
        copy = rate(SLAVE_FUN(copy), "copy", 16.0);
        triad = rate(SLAVE_FUN(triad), "triad", 24.0);
        printf("%ld %.1f %.1f\n", sizes[k] * 8, copy, triad);
    }
    athread_halt();
    return 0;
}
