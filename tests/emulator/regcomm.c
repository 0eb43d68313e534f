/* Register communication on the emulator (SW26010): a 32 x 32 x 32 matrix product by SUMMA
 * on the 8 x 8 mesh, each CPE owning a 4 x 4 block of A, B and C. At step k the CPEs of
 * column k broadcast their A block along their rows (simd_putr), those of row k their B block
 * along their columns (simd_putc), and the others receive (simd_getr, simd_getc). Prints "ok"
 * and exits 0 when C equals the product computed on the host; otherwise names the failed
 * check and exits 1.
 *
 * With an argument it runs one broken kernel instead, which the emulator must stop with one
 * message: "unmatched" (CPE 9 waits for a column message nobody sends), "lost" (CPE 0 puts
 * a row message CPE 3 never takes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <athread.h>
#include <slave.h>
#include <simd.h>

#include "swflow_emu.h"

#define SIDE 8
#define BLOCK 4
#define N (SIDE * BLOCK)

struct args {
    float *a, *b, *c; /* N x N, row-major */
};

static struct args args;

__thread_local struct args la;
__thread_local float la_block[BLOCK][BLOCK], lb_block[BLOCK][BLOCK], lc_block[BLOCK][BLOCK];
__thread_local volatile int reply;
__thread_local int issued;

static void read_args(void *arg)
{
    reply = 0;
    issued = 1;
    swflow_emu_ldm_buffer(&la, sizeof la, "args");
    athread_get(PE_MODE, arg, &la, sizeof la, (void *)&reply, 0, 0, 0);
    swflow_emu_wait((const void *)&reply, issued, 1);
}

/* Moves this CPE's BLOCK x BLOCK block of an N x N matrix: BLOCK rows, N - BLOCK floats apart. */
static void block_dma(int put, float *matrix, float (*block)[BLOCK])
{
    float *corner = matrix + (_ROW * BLOCK) * N + _COL * BLOCK;
    int stride = (N - BLOCK) * sizeof(float), bsize = BLOCK * sizeof(float);
    if (put)
        athread_put(PE_MODE, block, corner, sizeof(float) * BLOCK * BLOCK, (void *)&reply, stride, bsize);
    else
        athread_get(PE_MODE, corner, block, sizeof(float) * BLOCK * BLOCK, (void *)&reply, 0, stride, bsize);
    swflow_emu_wait((const void *)&reply, ++issued, 1);
}

void slave_summa(void *arg)
{
    int k, i, j;
    floatv4 a_row[BLOCK], b_row[BLOCK], c_row[BLOCK];
    read_args(arg);
    swflow_emu_ldm_buffer(la_block, sizeof la_block, "a");
    swflow_emu_ldm_buffer(lb_block, sizeof lb_block, "b");
    swflow_emu_ldm_buffer(lc_block, sizeof lc_block, "c");
    block_dma(0, la.a, la_block);
    block_dma(0, la.b, lb_block);
    for (i = 0; i < BLOCK; i++)
        c_row[i] = (floatv4){0, 0, 0, 0};
    for (k = 0; k < SIDE; k++) {
        for (i = 0; i < BLOCK; i++) {
            if (_COL == k) {
                simd_loadu(a_row[i], la_block[i]);
                simd_putr(a_row[i], 8);
            } else {
                a_row[i] = simd_getr(a_row[i]);
            }
            if (_ROW == k) {
                simd_loadu(b_row[i], lb_block[i]);
                simd_putc(b_row[i], 8);
            } else {
                b_row[i] = simd_getc(b_row[i]);
            }
        }
        /* c[i][:] += a[i][j] * b[j][:] */
        for (i = 0; i < BLOCK; i++)
            for (j = 0; j < BLOCK; j++) {
                floatv4 aij;
                simd_loade(aij, &((float *)&a_row[i])[j]);
                c_row[i] = simd_vmas(aij, b_row[j], c_row[i]);
            }
    }
    for (i = 0; i < BLOCK; i++)
        simd_storeu(c_row[i], lc_block[i]);
    block_dma(1, la.c, lc_block);
}

void slave_unmatched(void *arg)
{
    floatv4 v = {0, 0, 0, 0};
    (void)arg;
    if (_MYID == 9)
        v = simd_getc(v);
    (void)v;
}

void slave_lost(void *arg)
{
    floatv4 v = {1, 2, 3, 4};
    (void)arg;
    if (_MYID == 0)
        simd_putr(v, 3);
}

int main(int argc, char **argv)
{
    static float a[N * N], b[N * N], c[N * N];
    int i, j, k, failures = 0;
    if (argc > 1) {
        athread_init();
        if (strcmp(argv[1], "unmatched") == 0)
            athread_spawn(unmatched, &args);
        else if (strcmp(argv[1], "lost") == 0)
            athread_spawn(lost, &args);
        athread_join();
        printf("no violation\n");
        return 0;
    }
    /* Small integers: every product and sum is exact in f32, in any order. */
    for (i = 0; i < N * N; i++) {
        a[i] = (float)(i * 7 % 11 - 5);
        b[i] = (float)(i * 5 % 13 - 6);
        c[i] = -1000;
    }
    swflow_emu_main_region(a, sizeof a, "a");
    swflow_emu_main_region(b, sizeof b, "b");
    swflow_emu_main_region(c, sizeof c, "c");
    args.a = a;
    args.b = b;
    args.c = c;
    athread_init();
    athread_spawn(summa, &args);
    athread_join();
    for (i = 0; i < N; i++)
        for (j = 0; j < N; j++) {
            float want = 0;
            for (k = 0; k < N; k++)
                want += a[i * N + k] * b[k * N + j];
            if (c[i * N + j] != want && failures++ < 5)
                printf("failed: c[%d][%d] = %g, want %g\n", i, j, c[i * N + j], want);
        }
    athread_halt();
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
