/* DMA classes through swflow_slave.h, as generated code sets them: kernel `fwd` pushes two
 * layers of streamed tape per CPE (SWFLOW_DMA_TAPE_STREAM), writes a record of random-access
 * tape (SWFLOW_DMA_TAPE) and its output as data; kernel `bwd` pops the layers in reverse
 * order and reads the record back. Prints "ok" and exits 0 when the values come back; the
 * test reads the emulator's statistics for the tape counters.
 *
 * With the argument `wrong-order`, CPE 5 of the backward kernel pops the first layer first;
 * with `reset`, the host forgets the tape (swflow_emu_tape_reset) before the backward kernel.
 * Either stops the program with the emulator's message. */
#include <stdio.h>
#include <string.h>

#include <athread.h>
#include <slave.h>

#include "swflow_slave.h"

#define CPES 64
#define FIRST 256  /* floats of the first layer */
#define SECOND 128 /* floats of the second layer */
#define RECORD 64  /* floats of the record */
#define SLOT (FIRST + SECOND)

struct args {
    float *tape;   /* SLOT floats per CPE: the two layers, one after the other */
    float *record; /* RECORD floats per CPE */
    float *out;    /* SLOT + RECORD floats per CPE */
    int wrong;     /* CPE 5 pops the first layer first */
};

static struct args a;

__thread_local struct args la;
__thread_local float lbuf[SLOT + RECORD];
__thread_local swflow_reply_t reply;

static void read_args(void *arg)
{
    reply = 0;
    SWFLOW_LDM_BUFFER(&la, sizeof la, "args");
    SWFLOW_LDM_BUFFER(lbuf, sizeof lbuf, "lbuf");
    swflow_dma(0, &la, (char *)arg, sizeof la, 0, 0, &reply);
    SWFLOW_DMA_WAIT(reply, 1);
}

void slave_fwd(void *arg)
{
    int id = SWFLOW_CPE_ID, i;
    char *tape;
    read_args(arg);
    tape = (char *)(la.tape + id * SLOT);
    for (i = 0; i < SLOT + RECORD; i++)
        lbuf[i] = (float)(1000 * id + i);
    SWFLOW_DMA_CLASS(SWFLOW_DMA_TAPE_STREAM);
    swflow_dma(1, lbuf, tape, FIRST * sizeof(float), 0, 0, &reply);
    swflow_dma(1, lbuf + FIRST, tape + FIRST * sizeof(float), SECOND * sizeof(float), 0, 0, &reply);
    SWFLOW_DMA_CLASS(SWFLOW_DMA_TAPE);
    swflow_dma(1, lbuf + SLOT, (char *)(la.record + id * RECORD), RECORD * sizeof(float), 0, 0, &reply);
    SWFLOW_DMA_CLASS(SWFLOW_DMA_DATA);
    SWFLOW_DMA_WAIT(reply, 4);
}

void slave_bwd(void *arg)
{
    int id = SWFLOW_CPE_ID;
    char *tape;
    read_args(arg);
    tape = (char *)(la.tape + id * SLOT);
    memset(lbuf, 0, sizeof lbuf);
    SWFLOW_DMA_CLASS(SWFLOW_DMA_TAPE_STREAM);
    if (la.wrong && id == 5)
        swflow_dma(0, lbuf, tape, FIRST * sizeof(float), 0, 0, &reply);
    swflow_dma(0, lbuf + FIRST, tape + FIRST * sizeof(float), SECOND * sizeof(float), 0, 0, &reply);
    swflow_dma(0, lbuf, tape, FIRST * sizeof(float), 0, 0, &reply);
    SWFLOW_DMA_CLASS(SWFLOW_DMA_TAPE);
    swflow_dma(0, lbuf + SLOT, (char *)(la.record + id * RECORD), RECORD * sizeof(float), 0, 0, &reply);
    SWFLOW_DMA_CLASS(SWFLOW_DMA_DATA);
    SWFLOW_DMA_WAIT(reply, 4);
    swflow_dma(1, lbuf, (char *)(la.out + id * (SLOT + RECORD)), sizeof lbuf, 0, 0, &reply);
    SWFLOW_DMA_WAIT(reply, 5);
}

int main(int argc, char **argv)
{
    static float tape[CPES * SLOT], record[CPES * RECORD], out[CPES * (SLOT + RECORD)];
    const char *mode = argc > 1 ? argv[1] : "";
    int i;
    swflow_emu_main_region(tape, sizeof tape, "tape");
    swflow_emu_main_region(record, sizeof record, "record");
    swflow_emu_main_region(out, sizeof out, "out");
    a.tape = tape;
    a.record = record;
    a.out = out;
    a.wrong = strcmp(mode, "wrong-order") == 0;
    athread_init();
    athread_spawn(fwd, &a);
    athread_join();
    if (strcmp(mode, "reset") == 0)
        swflow_emu_tape_reset();
    athread_spawn(bwd, &a);
    athread_join();
    athread_halt();
    for (i = 0; i < CPES * (SLOT + RECORD); i++) {
        if (out[i] != (float)(1000 * (i / (SLOT + RECORD)) + i % (SLOT + RECORD))) {
            printf("failed: element %d came back as %g\n", i, (double)out[i]);
            return 1;
        }
    }
    printf("ok\n");
    return 0;
}
