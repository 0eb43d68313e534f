/* Prototypes of the SW26010-Pro SDK's crts.h (host and CPE sides), for
 * `make check-sunway-pro`. Declarations only. */
#ifndef SWFLOW_SDK_CRTS_H
#define SWFLOW_SDK_CRTS_H

#include <stddef.h>

#define __thread_local __thread
#define SLAVE_FUN(name) slave_##name

typedef volatile int crts_rply_t;

int CRTS_init(void);
int athread_join(void);
int athread_halt(void);
int __real_athread_spawn(void *function, void *arg, int flag);

#define athread_spawn(function, arg) __real_athread_spawn((void *)SLAVE_FUN(function), (void *)(arg), 1)

extern __thread_local int CRTS_tid;
extern __thread_local int CRTS_rid;
extern __thread_local int CRTS_cid;

int CRTS_dma_iget(void *dst, void *src, size_t len, crts_rply_t *reply);
int CRTS_dma_iput(void *dst, void *src, size_t len, crts_rply_t *reply);
int CRTS_dma_iget_stride(void *dst, void *src, size_t len, size_t bsize, size_t stride, crts_rply_t *reply);
int CRTS_dma_iput_stride(void *dst, void *src, size_t len, size_t bsize, size_t stride, crts_rply_t *reply);
void CRTS_dma_wait_value(crts_rply_t *reply, int value);
void CRTS_ssync_array(void);
/* Collective broadcast along the calling CPE's row or column by remote LDM access: every CPE
 * of the line calls it; the root's (column `root` of a row, row `root` of a column) `len`
 * bytes at `src` reach `dst` on every CPE of the line, the root included. */
int CRTS_rma_row_bcast_coll(void *dst, void *src, int len, int root);
int CRTS_rma_col_bcast_coll(void *dst, void *src, int len, int root);
/* Broadcast along the calling CPE's row or column by remote LDM access that only the sender
 * calls and that returns at once: the `len` bytes at `src` reach `dst` on every CPE of the
 * line, the sender included; `l_rply` on the sender counts the sends complete, `r_rply` on
 * every CPE of the line the blocks that landed there. */
int CRTS_rma_row_ibcast(void *dst, void *src, int len, crts_rply_t *l_rply, crts_rply_t *r_rply);
int CRTS_rma_col_ibcast(void *dst, void *src, int len, crts_rply_t *l_rply, crts_rply_t *r_rply);
/* Waits until the reply word reaches `value`. */
int CRTS_rma_wait_value(crts_rply_t *rply, int value);
/* Sync of the CPEs of the calling CPE's row, or of its column. */
int CRTS_ssync_row(void);
int CRTS_ssync_col(void);
void *CRTS_pldm_malloc(size_t size);
void CRTS_pldm_free(void *addr, size_t size);

#endif
