/* The athread and CRTS interfaces on top of the swflow emulator. `swflow_machine.h` (written
 * by swflow for each target) defines SWFLOW_CPES and SWFLOW_LDM_BYTES, the target's CPE count
 * and LDM bytes for data, and SWFLOW_MACHINE, the machine description that times the run. */
#include "athread.h"
#include "slave.h"
#include "crts.h"
#include "swflow_emu.h"
#include "swflow_machine.h"

#if !defined(SWFLOW_CPES) || !defined(SWFLOW_LDM_BYTES) || !defined(SWFLOW_MACHINE)
#error "swflow_machine.h must define SWFLOW_CPES, SWFLOW_LDM_BYTES and SWFLOW_MACHINE"
#endif

int athread_init(void)
{
    return swflow_emu_init(SWFLOW_CPES, SWFLOW_LDM_BYTES, SWFLOW_MACHINE);
}

int CRTS_init(void)
{
    return athread_init();
}

int athread_halt(void)
{
    swflow_emu_halt();
    return 0;
}

int athread_join(void)
{
    swflow_emu_join();
    return 0;
}

int swflow_athread_spawn(const char *name, void (*func)(void *), void *arg, size_t arg_bytes)
{
    swflow_emu_spawn(name, func, arg, arg_bytes);
    return 0;
}

int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply, char mask, int stride, int bsize)
{
    (void)mask;
    if (mode != PE_MODE)
        swflow_emu_fail("athread_get: only PE_MODE transfers are emulated");
    swflow_emu_dma(0, src, dest, len, reply, stride, bsize);
    return 0;
}

int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply, int stride, int bsize)
{
    if (mode != PE_MODE)
        swflow_emu_fail("athread_put: only PE_MODE transfers are emulated");
    swflow_emu_dma(1, dest, src, len, reply, stride, bsize);
    return 0;
}

int athread_get_id(int core)
{
    if (core != -1)
        swflow_emu_fail("athread_get_id: only the calling CPE's id (-1) is emulated");
    return swflow_emu_cpe_id();
}

void athread_syn(scope scp, int mask)
{
    if (scp != ARRAY_SCOPE || (mask & 0xffff) != 0xffff)
        swflow_emu_fail("athread_syn: only ARRAY_SCOPE barriers over all CPEs are emulated");
    swflow_emu_barrier();
}

int CRTS_dma_iget(void *dst, void *src, size_t len, crts_rply_t *reply)
{
    swflow_emu_dma(0, src, dst, (long)len, (void *)reply, 0, 0);
    return 0;
}

int CRTS_dma_iput(void *dst, void *src, size_t len, crts_rply_t *reply)
{
    swflow_emu_dma(1, dst, src, (long)len, (void *)reply, 0, 0);
    return 0;
}

int CRTS_dma_iget_stride(void *dst, void *src, size_t len, size_t bsize, size_t stride, crts_rply_t *reply)
{
    swflow_emu_dma(0, src, dst, (long)len, (void *)reply, (long)stride, (long)bsize);
    return 0;
}

int CRTS_dma_iput_stride(void *dst, void *src, size_t len, size_t bsize, size_t stride, crts_rply_t *reply)
{
    swflow_emu_dma(1, dst, src, (long)len, (void *)reply, (long)stride, (long)bsize);
    return 0;
}

void CRTS_dma_wait_value(crts_rply_t *reply, int value)
{
    swflow_emu_wait((const void *)reply, value, 0);
}

void CRTS_ssync_array(void)
{
    swflow_emu_barrier();
}

int swflow_crts_tid(void)
{
    return swflow_emu_cpe_id();
}
