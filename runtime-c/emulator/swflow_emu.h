/* The emulator's C ABI (implemented in Rust by the swflow-emulator crate). The athread and
 * CRTS interfaces of this folder are built on it; generated code never calls it directly
 * except through the macros of swflow_slave.h. */
#ifndef SWFLOW_EMU_H
#define SWFLOW_EMU_H

#include <stddef.h>

/* Starts the core group (CPE count, LDM bytes per CPE for data), timed by the machine
 * description `spec` (TOML text; NULL: functional only); 0 on success. Every call forgets
 * the streamed tape, as swflow_emu_tape_reset. */
int swflow_emu_init(int cpes, long ldm_bytes, const char *spec);
/* Registers main memory that DMA may reach. */
void swflow_emu_main_region(const void *base, size_t bytes, const char *name);
/* Starts kernel `func` on every CPE with `arg` (arg_bytes readable by DMA); joins first. */
void swflow_emu_spawn(const char *kernel, void (*func)(void *), void *arg, size_t arg_bytes);
/* Waits for the running launch and checks it for races. */
void swflow_emu_join(void);
/* Joins and prints the per-kernel counters when SWFLOW_STATS is set. */
void swflow_emu_halt(void);
/* The host's modelled time since the core group started, seconds (0 when untimed). */
double swflow_emu_seconds(void);
/* The calling CPE's id, -1 on the host. */
int swflow_emu_cpe_id(void);
/* Declares an LDM buffer of the running kernel on the calling CPE. */
void swflow_emu_ldm_buffer(const void *base, size_t bytes, const char *name);
/* Sets the class of the calling CPE's later DMA: 0 data, 1 gradient tape, 2 streamed tape
 * (SWFLOW_DMA_DATA, SWFLOW_DMA_TAPE, SWFLOW_DMA_TAPE_STREAM of swflow_slave.h). Every launch
 * starts with data. Tape transfers are counted and timed apart as well as in the totals; a
 * streamed-tape put must be contiguous and start where the CPE's last pushed layer ends (it
 * pushes a layer), a streamed-tape get must bring back exactly that layer (it pops it). */
void swflow_emu_dma_class(int dma_class);
/* Joins the running launch and forgets every CPE's outstanding layers of streamed tape (the
 * layers outlive launches): for a host whose training step leaves tape behind on purpose. */
void swflow_emu_tape_reset(void);
/* Issues a DMA (dir 0: get into LDM, 1: put from LDM) of the CPE's current class; completes
 * at the matching wait. */
void swflow_emu_dma(int dir, const void *main, void *ldm, long len, void *reply, long stride, long bsize);
/* Checks a direct main-memory access of `bytes` at `addr` by the calling CPE (a write when
 * `write`, which also joins the race check) and returns `addr`. */
void *swflow_emu_direct(const void *addr, size_t bytes, int write);
/* Completes the transfers on `reply`; the counter must reach n (exactly n when exact). */
void swflow_emu_wait(const void *reply, long n, int exact);
/* The operations of one straight-line stretch of CPE code, by class (the emulator's timing
 * model, emulator/src/timing.rs, says how each class issues). */
struct swflow_ops {
    unsigned int flops;   /* floating-point operations performed (reports only) */
    unsigned int fp;      /* pipelined float/vector instructions: add, sub, mul, fma, compare, convert */
    unsigned int div;     /* divisions (float, or integer in software) */
    unsigned int sqrt;    /* square roots */
    unsigned int calls;   /* calls to library routines (exp, log, ...) */
    unsigned int load;    /* LDM loads */
    unsigned int store;   /* LDM stores */
    unsigned int integer; /* integer and address arithmetic */
    unsigned int branch;  /* branches */
    unsigned int carried; /* float instructions on the loop-carried dependence */
};
/* Charges the calling CPE for n executions of a stretch doing `ops`. */
void swflow_emu_charge(const struct swflow_ops *ops, long n);
/* Barrier across the CPEs of the launch. */
void swflow_emu_barrier(void);
/* Register communication (SW26010's 8 x 8 mesh): sends the `bytes` at `value` (one register,
 * at most 32 bytes) along the calling CPE's row (line 0) or column (line 1) to index `dst` of
 * it (0-7), or to every other CPE of it (8). */
void swflow_emu_regcomm_put(int line, const void *value, size_t bytes, int dst);
/* Takes the calling CPE's oldest message along its row (0) or column (1) into the `bytes` at
 * `value` (as many as were put), waiting for it; a get no put will ever match stops the
 * program. */
void swflow_emu_regcomm_get(int line, void *value, size_t bytes);
/* Sends the `bytes` of LDM at `ldm` to every other CPE of the calling CPE's row (line 0) or
 * column (1) as one block of registers (the hardware's loop of broadcasts); each receiver takes
 * it whole with swflow_emu_regcomm_recv_block of as many bytes. The ranges must lie in declared
 * LDM buffers. */
void swflow_emu_regcomm_send_block(int line, const void *ldm, size_t bytes);
void swflow_emu_regcomm_recv_block(int line, void *ldm, size_t bytes);
/* Remote LDM access (SW26010-Pro): posts the `bytes` of LDM at `ldm` to the same place of
 * every other CPE of the calling CPE's row (line 0) or column (1) without waiting, and adds
 * one to the reply word at `reply` (in LDM) for its own copy; each receiver adds one to its
 * word at the same place when the block lands, which swflow_emu_rma_wait waits for. */
void swflow_emu_rma_post(int line, const void *ldm, size_t bytes, int *reply);
/* Waits until the reply word at `reply` holds at least `count`, the blocks posted along the
 * calling CPE's row (0) or column (1) landing meanwhile. */
void swflow_emu_rma_wait(int line, int *reply, long count);
/* Waits until every CPE of the calling CPE's row (0) or column (1) has arrived. */
void swflow_emu_sync_line(int line);
/* Stops the program with a failure the running kernel detected. */
void swflow_emu_fail(const char *message);

#endif
