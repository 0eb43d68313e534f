/* Host-side athread interface (SW26010) for programs built against the swflow emulator.
 * Same names and meanings as the SDK's athread.h; athread_spawn also passes the kernel's
 * name and the size of its argument, so the emulator can name the kernel in reports and
 * let the CPEs read the argument by DMA. */
#ifndef SWFLOW_EMULATOR_ATHREAD_H
#define SWFLOW_EMULATOR_ATHREAD_H

#include <stddef.h>

/* The toolchain prefixes slave symbols with slave_; the Makefile does the same for the
 * emulator build. */
#define SLAVE_FUN(name) slave_##name

int athread_init(void);
int athread_halt(void);
int athread_join(void);
int swflow_athread_spawn(const char *name, void (*func)(void *), void *arg, size_t arg_bytes);

#define athread_spawn(function, arg) \
    swflow_athread_spawn(#function, SLAVE_FUN(function), (void *)(arg), sizeof *(arg))

#endif
