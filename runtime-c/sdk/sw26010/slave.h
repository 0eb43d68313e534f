/* Prototypes of the SW26010 SDK's slave.h (CPE side), for `make check-sunway`. The real
 * compiler places __thread_local variables in LDM; for a gcc syntax check a thread-local
 * variable has the same typing rules. Declarations only. */
#ifndef SWFLOW_SDK_SLAVE_H
#define SWFLOW_SDK_SLAVE_H

#define __thread_local __thread

typedef enum { PE_MODE, BCAST_MODE, ROW_MODE, BROW_MODE, RANK_MODE } dma_mode;
typedef enum { ROW_SCOPE, COL_SCOPE, ARRAY_SCOPE } scope;

extern __thread_local int _MYID;
extern __thread_local int _ROW;
extern __thread_local int _COL;

int athread_get(dma_mode mode, void *src, void *dest, int len, void *reply, char mask, int stride, int bsize);
int athread_put(dma_mode mode, void *src, void *dest, int len, void *reply, int stride, int bsize);
int athread_get_id(int core);
void athread_syn(scope scp, int mask);
void *ldm_malloc(unsigned long size);
void ldm_free(void *addr, unsigned long size);

#endif
