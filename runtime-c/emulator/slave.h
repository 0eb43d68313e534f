/* CPE-side athread interface (SW26010) for programs built against the swflow emulator.
 * Prototypes follow the SDK's slave.h; every CPE is a thread, so __thread_local variables
 * (LDM) have one copy per CPE. */
#ifndef SWFLOW_EMULATOR_SLAVE_H
#define SWFLOW_EMULATOR_SLAVE_H

#define __thread_local __thread

typedef enum { PE_MODE, BCAST_MODE, ROW_MODE, BROW_MODE, RANK_MODE } dma_mode;
typedef enum { ROW_SCOPE, COL_SCOPE, ARRAY_SCOPE } scope;

int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply, char mask, int stride, int bsize);
int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply, int stride, int bsize);
int athread_get_id(int core);
void athread_syn(scope scp, int mask);

#define _MYID (athread_get_id(-1))
#define _ROW (athread_get_id(-1) / 8)
#define _COL (athread_get_id(-1) % 8)

#endif
