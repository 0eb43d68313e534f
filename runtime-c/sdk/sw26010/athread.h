/* Prototypes of the SW26010 SDK's host-side athread.h, for `make check-sunway`: generated
 * host code is compiled with gcc -fsyntax-only against this header so that the Sunway build
 * is type-checked without the Sunway toolchain. Declarations only. */
#ifndef SWFLOW_SDK_ATHREAD_H
#define SWFLOW_SDK_ATHREAD_H

#define SLAVE_FUN(name) slave_##name

int athread_init(void);
int athread_halt(void);
int athread_join(void);
int __real_athread_spawn(void *function, void *arg);

#define athread_spawn(function, arg) __real_athread_spawn((void *)SLAVE_FUN(function), (void *)(arg))

#endif
