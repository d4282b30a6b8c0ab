/* doorbell.pml: parking workers without lost wake-ups, as the pool does it.
 *
 * Mirrors
 *   proctype Submitter  runtime/submit.c:knit__publish (publish, then
 *                       runtime/carpet.c:knit__carpet_flush: its seq-cst RMW
 *                       on host_bits is B1), then runtime/pool.c:
 *                       knit__pool_notify (seq-cst load of `spinning`: a
 *                       spinner will find the work) and knit__pool_wake_one
 *                       (seq-cst load of `parked`, fetch_and of one bit, only
 *                       the winner of the clear rings), then
 *                       runtime/doorbell.c:knit__doorbell_ring (B2: load; if
 *                       ARMED, CAS ARMED -> SIGNALLED; the winner calls futex
 *                       wake).
 *   proctype Worker     runtime/pool.c:knit__worker_main (find; on failure
 *                       count itself in `spinning` and spin, or park at once
 *                       when over max_spinners; the last spinner to find work
 *                       wakes one more sleeper if work is left; leave
 *                       `spinning` before parking) and runtime/pool.c:
 *                       knit__pool_park (A1 doorbell_arm: seq-cst store of
 *                       ARMED; fetch_or of its bit into `parked`; A2 the
 *                       seq-cst re-check; busy: clear the bit and disarm),
 *                       then runtime/doorbell.c:knit__doorbell_sleep (futex
 *                       wait while ARMED, exchange OFF) and the clear of the
 *                       bit after waking.
 * The futex is modelled exactly as the kernel provides it: the wait checks
 * the word and sleeps in one atomic step (it returns at once if the word is
 * no longer ARMED); a wake wakes a waiter that is asleep and is otherwise
 * lost. No spurious or timed-out returns (workers park with no timeout):
 * a wake-up that the protocol does not deliver is never made up for.
 * The carpets and deques are abstracted to a count of claimable tasks
 * (`pending`, what knit__pool_any_pending sees); claiming is atomic here,
 * the claim protocols being checked in lane/ticket/dekker.pml. All the
 * operations involved are seq-cst (or RMWs), so the interleaving semantics
 * of Promela is exact for them.
 *
 * NCONS workers (spin -DNCONS=1..3), one submitter, NPUB submits.
 *
 * Verified (safety run: assertions + invalid end states):
 *   - no lost wake-up: the submitter ends waiting until every task ran; if
 *     every worker sleeps while a task is pending, nothing can move and
 *     the run ends in an invalid end state (a sleeping worker is a valid
 *     end state only at its end label with nothing left to run);
 *   - the doorbell word is only ever OFF, ARMED or SIGNALLED, SIGNALLED
 *     only by a waker that saw ARMED, and a worker only sleeps on an ARMED
 *     word;
 *   - no deadlock: all processes end at end labels.
 *
 * With -DASYM, B1 is the asymmetric fence (base/asym_fence.h): the
 * submitter's flush is a compiler barrier, so its publication may sit in
 * its store buffer (`sbuf`, visible to nobody) while it loads `spinning`
 * and `parked`; the StoreBuffer process drains it at any moment (x86-TSO:
 * one location, so the order within the buffer does not matter). A
 * parking worker, when a first cheap look finds nothing, calls membarrier
 * between setting its parked bit and its re-check (runtime/pool.c:
 * knit__pool_park): the kernel interrupts every running thread of the
 * process, which drains the submitter's buffer at that point (an atomic
 * drain in the worker's step). A submitter that sees a spinner fences
 * (drains its own buffer) and looks at `spinning` again before it trusts
 * it (knit__pool_notify_published). Everything else stays seq-cst.
 *
 * Seeded bugs:
 *   -DBUG_RECHECK_FIRST  the worker re-checks for work before it arms and
 *                        sets its parked bit: a submit between the two sees
 *                        no parked worker, and the worker sleeps with the
 *                        task pending (invalid end state).
 *   -DASYM -DBUG_NO_MEMBARRIER  the worker parks without the membarrier:
 *                        its re-check misses a publication still in the
 *                        submitter's store buffer while the submitter's
 *                        load missed the parked bit (invalid end state).
 *   -DASYM -DBLOCKING -DBUG_SPIN_NO_FENCE  the submitter trusts a spinner
 *                        without its fence: the last spinner takes other
 *                        work, misses the buffered task in its look for
 *                        work left, and wakes nobody. Under -DBLOCKING (the
 *                        first task a last spinner runs waits for all the
 *                        others, as a task waiting on an event another task
 *                        sets) that leaves the task to a sleeping worker:
 *                        invalid end state.
 *
 * -DBLOCKING checks that every published task gets a running worker even
 * when the one it would otherwise wait for is blocked (the last
 * spinner's wake-one-more rule).
 */
#ifndef NCONS
#define NCONS 2
#endif
#ifndef NPUB
#define NPUB 2
#endif
#define OFF 0
#define ARMED 1
#define SIGNALLED 2
/* p->max_spinners = threads / 2, at least 1 */
#define MAXSPIN ((NCONS / 2) > 0 -> (NCONS / 2) : 1)

byte pending;              /* claimable tasks (host ^ worker, deques) */
byte nrun;                 /* ghost: tasks run */
byte started;              /* ghost (BLOCKING): tasks started */
byte bell[NCONS];          /* the doorbell word of each worker */
bool asleep[NCONS];        /* ghost: the worker waits in the futex */
byte parked;               /* bitmask of parked workers */
byte spinning;             /* workers counted as spinning */
byte sbuf;                 /* ASYM: publications in the submitter's store
                              buffer, not yet in `pending` */

#ifdef ASYM
/* The store buffer drains on its own, at any moment. */
active proctype StoreBuffer() {
end_sb:
    do
    :: atomic { sbuf > 0 -> pending = pending + sbuf; sbuf = 0 }
    od
}
#endif

/* runtime/doorbell.c:knit__doorbell_ring, then futex wake. */
inline ring(w) {
    if
    :: bell[w] == ARMED ->                   /* B2, seq-cst load */
        atomic {                             /* CAS ARMED -> SIGNALLED */
            if
            :: bell[w] == ARMED -> bell[w] = SIGNALLED; won = 1
            :: else -> won = 0
            fi
        }
        if
        :: won -> asleep[w] = 0; won = 0     /* FUTEX_WAKE, 1 waiter */
        :: else
        fi
    :: else
    fi
}

/* runtime/pool.c:knit__pool_wake_one */
inline wake_one() {
    m = parked;                              /* seq-cst load */
    do
    :: m == 0 -> break
    :: else ->
        b = 0;
        do                                   /* ctz */
        :: (m >> b) & 1 -> break
        :: else -> b++
        od;
        atomic { prev = parked; parked = parked & ~(1 << b) }
        if
        :: (prev >> b) & 1 -> ring(b); break
        :: else -> m = prev & ~(1 << b)
        fi
    od;
    m = 0; b = 0; prev = 0
}

active proctype Submitter() {
    byte npub = 0, m, b, prev;
    bool won;
    do
    :: npub < NPUB ->
#ifdef ASYM
        sbuf++;                              /* publish; B1 is a compiler
                                                barrier: still buffered */
#else
        pending++;                           /* publish, flush: B1 */
#endif
        npub++;
        if                          /* knit__pool_notify(_published) */
        :: spinning != 0 ->
#if defined(ASYM) && !defined(BUG_SPIN_NO_FENCE)
            /* seq-cst fence: drains this core's store buffer, then a
               second look at `spinning` */
            atomic { pending = pending + sbuf; sbuf = 0 };
            if
            :: spinning != 0 -> skip
            :: else -> wake_one()
            fi
#else
            skip
#endif
        :: else -> wake_one()
        fi
    :: else -> break
    od;
    (nrun == NPUB)                           /* every task ran */
}

proctype Worker(byte me) {
    byte m, b, prev;
    bool won, spinl, found, lastsp, first;
end_loop:
    do
    :: atomic {                              /* knit__find */
           if
           :: pending > 0 -> pending--; found = 1
           :: else -> found = 0
           fi
       };
       if
       :: found ->
           found = 0;
           if
           :: spinl ->
               spinl = 0;
               atomic { prev = spinning; spinning-- };
               lastsp = (prev == 1);
               if                            /* the last spinner */
               :: prev == 1 && parked != 0 && pending > 0 -> prev = 0; wake_one()
               :: else -> prev = 0
               fi
           :: else
           fi;
#ifdef BLOCKING
           /* The first task a last spinner runs waits for every other
              task: it must not be the one thread left to run them. */
           atomic { first = (started == 0) && lastsp; started++ };
           lastsp = 0;
           if
           :: first -> first = 0; (nrun == NPUB - 1); nrun++
           :: else -> nrun++
           fi
#else
           lastsp = 0;
           nrun++                            /* the task runs */
#endif
       :: else ->
           if
           :: !spinl ->
               atomic { prev = spinning; spinning++ };
               spinl = 1;
               if
               :: prev >= MAXSPIN -> prev = 0; goto park   /* park at once */
               :: else -> prev = 0                         /* spin: find again */
               fi
           :: else ->
park:
               spinl = 0;
               spinning--;                   /* seq-cst, before the re-check */
#ifdef BUG_RECHECK_FIRST
               if
               :: pending > 0 -> goto end_loop
               :: else
               fi;
               bell[me] = ARMED;
               parked = parked | (1 << me);
#else
               bell[me] = ARMED;             /* A1 */
               parked = parked | (1 << me);  /* seq-cst RMW */
#if defined(ASYM)
               if                            /* the cheap look first */
               :: pending > 0 ->
                   parked = parked & ~(1 << me);
                   bell[me] = OFF;
                   goto end_loop
               :: else
               fi;
#if !defined(BUG_NO_MEMBARRIER)
               /* knit__asym_heavy: membarrier drains the submitter's
                  store buffer */
               atomic { pending = pending + sbuf; sbuf = 0 };
#endif
#endif
               if
               :: pending > 0 ->             /* A2: busy */
                   parked = parked & ~(1 << me);
                   bell[me] = OFF;           /* disarm */
                   goto end_loop
               :: else
               fi;
#endif
               /* knit__doorbell_sleep: futex wait while ARMED */
               atomic {
                   if
                   :: bell[me] == ARMED -> asleep[me] = 1
                   :: else
                   fi
               };
end_sleep:
               !asleep[me];
               atomic {                      /* drain: exchange OFF */
                   assert(bell[me] == ARMED || bell[me] == SIGNALLED);
                   bell[me] = OFF
               };
               parked = parked & ~(1 << me)
           fi
       fi
    od
}

init {
    byte i = 0;
    atomic {
        do
        :: i < NCONS -> run Worker(i); i++
        :: else -> break
        od
    }
}
