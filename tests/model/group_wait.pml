/* group_wait.pml: waiting for a task group, and destroying it right after.
 *
 * Mirrors
 *   proctype Member  runtime/group.c:knit__group_live_drop, run by each
 *                    member when it finishes: one CAS on `live` that takes
 *                    the member off the live count and, if it was the last,
 *                    adds one to the ringing count in the same step; only
 *                    the last then loads `watched` (seq-cst), takes the
 *                    waiter list under the group's lock, subtracts its
 *                    ringing count (release), and afterwards touches only
 *                    the waiter's record (runtime/future.c:
 *                    knit__waiters_ring_list: ring the doorbell of an
 *                    outside thread's record, then mark it released).
 *   proctype Waiter  runtime/future.c:knit__wait_set for a group
 *                    (knit_group_wait): the seq-cst load of `live`; arm the
 *                    doorbell; link a record under the lock after a
 *                    seq-cst store of `watched` and a load of `live`; the
 *                    re-check; sleep on the doorbell; unlink (or wait for
 *                    `released` if the finisher took the record); then
 *                    runtime/group.c:knit_group_destroy: wait while a last
 *                    finisher still rings, then free.
 * All the accesses are seq-cst, RMWs, or ordered by the group's lock, so
 * Promela's interleavings are exact for them. The futex is the kernel's:
 * the wait checks the word and sleeps in one step, a wake that finds no
 * sleeper is lost, and there are no spurious returns.
 *
 *   proctype Worker  runtime/group.c:knit__group_drop_defer and
 *                    knit__group_drop_flush, with the flush points of
 *                    runtime/pool.c's worker loop: a worker runs KM members
 *                    of the group one after another and keeps the count
 *                    back; it takes n off `live` in one CAS (the same drop
 *                    as a Member's, last iff the live bits are n) at any
 *                    point between two members (the cap of 64, a member of
 *                    another group), before it runs a task that is not a
 *                    member (here one that blocks until the group's wait
 *                    has returned: a user's task may wait for anything),
 *                    and before it goes idle (spins, parks or exits).
 *
 * NM members that drop one each (spin -DNM=0..3) and NW workers
 * (-DNW=0..2) that keep KM members each back (-DKM=1..3), one waiter that
 * destroys the group.
 *
 * Verified (safety: assertions + invalid end states):
 *   - no member touches the group after destroy freed it;
 *   - no member touches the waiter's record after the waiter left;
 *   - no lost wake-up: the waiter never sleeps for ever once no member is
 *     live (an invalid end state).
 *
 * Seeded bugs:
 *   -DBUG_PLAIN_DROP    the last member subtracts itself with a plain
 *                       decrement and then loads `watched`: the waiter sees
 *                       the group idle, destroys it, and the member reads
 *                       freed memory (assertion).
 *   -DBUG_WATCHED_FIRST the member loads `watched` before its decrement:
 *                       a waiter that registers in between is never rung
 *                       (invalid end state).
 *   -DBUG_LAST_IS_ONE   a worker's drop of n is the last only if the live
 *                       bits were 1 (the one-member test): the drop that
 *                       empties the group does not ring (invalid end
 *                       state).
 *   -DBUG_KEEP_ACROSS_OTHER the worker keeps its count while it runs a
 *                       task that is not a member: that task waits for the
 *                       group, the group waits for the count (invalid end
 *                       state).
 *   -DBUG_KEEP_WHEN_IDLE the worker parks with its count kept: the group
 *                       never empties (invalid end state).
 */
#ifndef NM
#define NM 2
#endif
#ifndef NW
#define NW 0
#endif
#ifndef KM
#define KM 2
#endif
#define OFF 0
#define ARMED 1
#define SIGNALLED 2

byte live = NM + NW * KM; /* members not finished */
byte ringing = 0;    /* last finishers still inside the group */
bit watched = 0;
bit lock = 0;
bit linked = 0;      /* the waiter's record is on the group's list */
bit released = 0;    /* the finisher is done with the record */
bit freed = 0;       /* knit_group_destroy freed the group */
bit record_gone = 0; /* the waiter's stack frame (its record) is gone */
bit waited = 0;      /* knit_group_wait has returned */
byte bell = OFF;     /* the waiter's doorbell */

inline group_access() { assert(!freed) }

/* knit__group_live_drop(g, n): takes n finished members off `live` in one
 * CAS; the last (live bits == n) then rings the waiters. */
inline drop(n) {
    last = 0;
    w = 0;
    took = 0;
#ifdef BUG_WATCHED_FIRST
    group_access();
    w = watched;
#endif
#ifdef BUG_PLAIN_DROP
    atomic { group_access(); last = (live == n); live = live - n }
#else
    atomic {
        group_access();
        if
#ifdef BUG_LAST_IS_ONE
        :: live == 1 -> last = 1; live = 0; ringing++
        :: else -> live = live - n
#else
        :: live == n -> last = 1; live = 0; ringing++
        :: else -> live = live - n
#endif
        fi
    }
#endif
    if
    :: last ->
#ifndef BUG_WATCHED_FIRST
        group_access();
        w = watched;
#endif
        if
        :: w ->
            atomic { group_access(); lock == 0 -> lock = 1 };
            took = linked;
            linked = 0;
            lock = 0
        :: else
        fi;
#ifndef BUG_PLAIN_DROP
        atomic { group_access(); ringing-- };
#endif
        /* Only the record from here on. */
        if
        :: took ->
            assert(!record_gone);
            atomic { if :: bell == ARMED -> bell = SIGNALLED :: else fi };
            assert(!record_gone);
            released = 1
        :: else
        fi
    :: else
    fi
}

proctype Member() {
    bit last, w, took;
    drop(1)
}

proctype Worker() {
    bit last, w, took;
    byte k = KM;
    byte n = 0; /* drop_n: finished here, not yet taken off `live` */
    do
    :: k > 0 ->
        k--; n++; /* one more member run and kept back */
        if
        :: n > 0 -> drop(n); n = 0 /* the cap, or another group's member */
        :: true
        fi
    :: k == 0 -> break
    od;
    if
    :: true ->
        /* The loop is about to run a task that is not a member. */
#ifndef BUG_KEEP_ACROSS_OTHER
        if :: n > 0 -> drop(n); n = 0 :: else fi;
#endif
        waited == 1 /* that task waits for the group's wait to return */
    :: true
    fi;
    /* Nothing to run: before it spins or parks. */
#ifndef BUG_KEEP_WHEN_IDLE
    if :: n > 0 -> drop(n); n = 0 :: else fi
#endif
}

proctype Waiter() {
    bit mine = 0;
again:
    if
    :: live == 0 -> goto idle
    :: else
    fi;
    bell = ARMED;
    released = 0;
    atomic { lock == 0 -> lock = 1 };
    watched = 1;
    mine = (live != 0);
    linked = mine;
    lock = 0;
    if
    :: mine && live != 0 ->
        /* futex wait: sleeps while ARMED, in one step with the check */
        bell != ARMED
    :: else
    fi;
    bell = OFF;
    if
    :: mine ->
        atomic { lock == 0 -> lock = 1 };
        if
        :: linked -> linked = 0; lock = 0
        :: else -> lock = 0; released == 1 /* the finisher has it */
        fi
    :: else
    fi;
    goto again;
idle:
    waited = 1;
    /* knit_group_destroy: no live member; wait out a last finisher. */
    (live == 0 && ringing == 0);
    freed = 1;
    record_gone = 1
}

init {
    atomic {
        byte i = 0;
        do
        :: i < NM -> run Member(); i++
        :: else -> break
        od;
        i = 0;
        do
        :: i < NW -> run Worker(); i++
        :: else -> break
        od;
        run Waiter()
    }
}
