/* CRTS interface (SW26010-Pro), host and CPE sides, for programs built against the swflow
 * emulator. Names and meanings follow the SDK's crts.h. */
#ifndef SWFLOW_EMULATOR_CRTS_H
#define SWFLOW_EMULATOR_CRTS_H

#include <stddef.h>

#include "athread.h"

#define __thread_local __thread

/* A reply counter: a running count of completed transfers. */
typedef volatile int crts_rply_t;

int CRTS_init(void);

int CRTS_dma_iget(void *dst, void *src, size_t len, crts_rply_t *reply);
int CRTS_dma_iput(void *dst, void *src, size_t len, crts_rply_t *reply);
int CRTS_dma_iget_stride(void *dst, void *src, size_t len, size_t bsize, size_t stride, crts_rply_t *reply);
int CRTS_dma_iput_stride(void *dst, void *src, size_t len, size_t bsize, size_t stride, crts_rply_t *reply);
/* Waits while *reply < value. */
void CRTS_dma_wait_value(crts_rply_t *reply, int value);
void CRTS_ssync_array(void);

int swflow_crts_tid(void);
#define CRTS_tid (swflow_crts_tid())
#define CRTS_rid (swflow_crts_tid() / 8)
#define CRTS_cid (swflow_crts_tid() % 8)

#endif
