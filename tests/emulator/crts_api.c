/* The CRTS interface on the emulator: identities, strided iget/iput, running reply counters
 * with CRTS_dma_wait_value, and CRTS_ssync_array. Prints "ok" and exits 0 when every check
 * holds. */
#include <stdio.h>

#include <crts.h>

#include "swflow_emu.h"

#define CPES 64
#define N 32

struct args {
    int *tids;   /* 3 ints per CPE: CRTS_tid, CRTS_rid, CRTS_cid */
    float *grid; /* CPES x N, row-major; CPE t doubles the even entries of row t */
    int *sums;   /* per CPE: the sum of all CPEs' ids, read after the barrier */
};

static struct args a;

__thread_local struct args la;
__thread_local int lt[4];
__thread_local float even[N / 2];
__thread_local int all[CPES];
__thread_local crts_rply_t rply;

void slave_work(void *arg)
{
    int i, sum = 0;
    rply = 0;
    swflow_emu_ldm_buffer(&la, sizeof la, "args");
    swflow_emu_ldm_buffer(lt, sizeof lt, "lt");
    swflow_emu_ldm_buffer(even, sizeof even, "even");
    swflow_emu_ldm_buffer(all, sizeof all, "all");
    CRTS_dma_iget(&la, arg, sizeof la, &rply);
    CRTS_dma_wait_value(&rply, 1);
    lt[0] = CRTS_tid;
    lt[1] = CRTS_rid;
    lt[2] = CRTS_cid;
    CRTS_dma_iput(la.tids + 3 * CRTS_tid, lt, 3 * sizeof(int), &rply);
    CRTS_dma_iget_stride(even, la.grid + N * CRTS_tid, N / 2 * sizeof(float), sizeof(float), sizeof(float), &rply);
    CRTS_dma_wait_value(&rply, 3);
    for (i = 0; i < N / 2; i++)
        even[i] *= 2;
    CRTS_dma_iput_stride(la.grid + N * CRTS_tid, even, N / 2 * sizeof(float), sizeof(float), sizeof(float), &rply);
    CRTS_dma_wait_value(&rply, 4);
    CRTS_ssync_array();
    CRTS_dma_iget_stride(all, la.tids, CPES * sizeof(int), sizeof(int), 2 * sizeof(int), &rply);
    CRTS_dma_wait_value(&rply, 5);
    for (i = 0; i < CPES; i++)
        sum += all[i];
    lt[3] = sum;
    CRTS_dma_iput(la.sums + CRTS_tid, &lt[3], sizeof(int), &rply);
    CRTS_dma_wait_value(&rply, 6);
}

int main(void)
{
    static int tids[3 * CPES], sums[CPES];
    static float grid[CPES * N];
    int i, failures = 0;
    swflow_emu_main_region(tids, sizeof tids, "tids");
    swflow_emu_main_region(grid, sizeof grid, "grid");
    swflow_emu_main_region(sums, sizeof sums, "sums");
    a.tids = tids;
    a.grid = grid;
    a.sums = sums;
    for (i = 0; i < CPES * N; i++)
        grid[i] = (float)i;
    CRTS_init();
    athread_spawn(work, &a);
    athread_join();
    for (i = 0; i < CPES; i++) {
        failures += tids[3 * i] != i || tids[3 * i + 1] != i / 8 || tids[3 * i + 2] != i % 8;
        failures += sums[i] != CPES * (CPES - 1) / 2;
    }
    for (i = 0; i < CPES * N; i++)
        failures += grid[i] != (i % 2 == 0 ? 2.0f : 1.0f) * (float)i;
    athread_halt();
    if (failures) {
        printf("failed: %d checks\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
