/* The athread interface on the emulator, one kernel per feature: identities, strided DMA,
 * barriers, and the asynchrony of DMA (data arrives at the wait, not at the issue). Prints
 * "ok" and exits 0 when every check holds; otherwise names the failed check and exits 1. */
#include <stdio.h>
#include <stdlib.h>

#include <athread.h>
#include <slave.h>

#include "swflow_emu.h"

#define CPES 64
#define ROWS 64
#define COLS 16

struct args {
    int *ids;       /* 4 ints per CPE: _MYID, _ROW, _COL, athread_get_id(-1) */
    float *matrix;  /* ROWS x COLS */
    float *column;  /* COLS: CPE c's copy of column c % COLS, read strided */
    int *slots;     /* one int per CPE */
    int *seen;      /* one int per CPE: the right neighbour's slot after the barrier */
    int *stale;     /* one int per CPE: the buffer before and after the wait */
};

static struct args a;

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("failed: %s\n", what);
        failures++;
    }
}

__thread_local struct args la;
__thread_local int lids[4];
__thread_local float lcol[ROWS];
__thread_local int lslot[2];
__thread_local volatile int reply;

static void read_args(void *arg)
{
    reply = 0;
    swflow_emu_ldm_buffer(&la, sizeof la, "args");
    athread_get(PE_MODE, arg, &la, sizeof la, (void *)&reply, 0, 0, 0);
    swflow_emu_wait((const void *)&reply, 1, 1);
}

void slave_ids(void *arg)
{
    read_args(arg);
    swflow_emu_ldm_buffer(lids, sizeof lids, "lids");
    lids[0] = _MYID;
    lids[1] = _ROW;
    lids[2] = _COL;
    lids[3] = athread_get_id(-1);
    athread_put(PE_MODE, lids, la.ids + 4 * _MYID, sizeof lids, (void *)&reply, 0, 0);
    swflow_emu_wait((const void *)&reply, 2, 1);
}

/* Column c of the matrix: ROWS blocks of one float, COLS - 1 floats apart. */
void slave_strided(void *arg)
{
    int c, i;
    read_args(arg);
    c = _MYID % COLS;
    swflow_emu_ldm_buffer(lcol, sizeof lcol, "lcol");
    athread_get(PE_MODE, la.matrix + c, lcol, ROWS * sizeof(float), (void *)&reply, 0, (COLS - 1) * sizeof(float),
                sizeof(float));
    swflow_emu_wait((const void *)&reply, 2, 1);
    for (i = 0; i < ROWS; i++)
        lcol[i] *= 2;
    if (_MYID < COLS) {
        athread_put(PE_MODE, lcol, la.matrix + c, ROWS * sizeof(float), (void *)&reply, (COLS - 1) * sizeof(float),
                    sizeof(float));
        swflow_emu_wait((const void *)&reply, 3, 1);
    }
}

void slave_barrier(void *arg)
{
    int right;
    read_args(arg);
    swflow_emu_ldm_buffer(lslot, sizeof lslot, "lslot");
    lslot[0] = 1000 + _MYID;
    athread_put(PE_MODE, lslot, la.slots + _MYID, sizeof(int), (void *)&reply, 0, 0);
    swflow_emu_wait((const void *)&reply, 2, 1);
    athread_syn(ARRAY_SCOPE, 0xffff);
    right = (_MYID + 1) % CPES;
    athread_get(PE_MODE, la.slots + right, &lslot[1], sizeof(int), (void *)&reply, 0, 0, 0);
    swflow_emu_wait((const void *)&reply, 3, 1);
    athread_put(PE_MODE, &lslot[1], la.seen + _MYID, sizeof(int), (void *)&reply, 0, 0);
    swflow_emu_wait((const void *)&reply, 4, 1);
}

void slave_async(void *arg)
{
    read_args(arg);
    swflow_emu_ldm_buffer(lslot, sizeof lslot, "lslot");
    lslot[0] = -1;
    athread_get(PE_MODE, la.slots + _MYID, &lslot[0], sizeof(int), (void *)&reply, 0, 0, 0);
    lslot[1] = lslot[0]; /* before the wait: still the old value */
    swflow_emu_wait((const void *)&reply, 2, 1);
    athread_put(PE_MODE, lslot, la.stale + 2 * _MYID, 2 * sizeof(int), (void *)&reply, 0, 0);
    swflow_emu_wait((const void *)&reply, 3, 1);
}

int main(void)
{
    static int ids[4 * CPES], slots[CPES], seen[CPES], stale[2 * CPES];
    static float matrix[ROWS * COLS], column[COLS];
    int i;
    swflow_emu_main_region(ids, sizeof ids, "ids");
    swflow_emu_main_region(matrix, sizeof matrix, "matrix");
    swflow_emu_main_region(slots, sizeof slots, "slots");
    swflow_emu_main_region(seen, sizeof seen, "seen");
    swflow_emu_main_region(stale, sizeof stale, "stale");
    a.ids = ids;
    a.matrix = matrix;
    a.column = column;
    a.slots = slots;
    a.seen = seen;
    a.stale = stale;
    for (i = 0; i < ROWS * COLS; i++)
        matrix[i] = (float)i;
    athread_init();

    athread_spawn(ids, &a);
    athread_join();
    for (i = 0; i < CPES; i++) {
        check(ids[4 * i] == i && ids[4 * i + 3] == i, "_MYID and athread_get_id(-1) give the CPE's id");
        check(ids[4 * i + 1] == i / 8 && ids[4 * i + 2] == i % 8, "_ROW and _COL place the CPE in the 8x8 mesh");
    }

    athread_spawn(strided, &a);
    athread_join();
    for (i = 0; i < ROWS * COLS; i++)
        check(matrix[i] == 2.0f * (float)i, "a strided get and put move exactly one column");

    athread_spawn(barrier, &a);
    athread_join();
    for (i = 0; i < CPES; i++)
        check(seen[i] == 1000 + (i + 1) % CPES, "after athread_syn every CPE sees its neighbour's write");

    athread_spawn(async, &a);
    athread_join();
    for (i = 0; i < CPES; i++)
        check(stale[2 * i + 1] == -1 && stale[2 * i] == 1000 + i, "a get's data arrives at the wait, not before");

    athread_halt();
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
