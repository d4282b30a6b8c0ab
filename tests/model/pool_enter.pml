/* pool_enter.pml: entering a pool against knit_pool_destroy.
 *
 * Mirrors
 *   proctype Caller    runtime/entry.c:knit__pool_enter / knit__pool_exit
 *                      for a thread outside the pool's tasks: with a free
 *                      slot, a seq-cst store of the handle into its slot,
 *                      then a seq-cst load of the state; refused (DEAD):
 *                      clear the slot. Inside, it uses the pool; a nested
 *                      call (NEST=1) finds its slot and counts a depth; the
 *                      last exit clears the slot (release). With SLOTS=0
 *                      the thread has no free slot and takes the overflow
 *                      path: a seq-cst RMW on `users`, the state load, and
 *                      an RMW down at exit.
 *   proctype Destroyer runtime/pool.c:knit_pool_destroy from the DEAD store
 *                      on: the seq-cst store of DEAD, then
 *                      runtime/entry.c:knit__entries_wait_out: wait for
 *                      `users` to be 0, then load every slot (seq-cst,
 *                      under the registry lock: a record cannot go away
 *                      meanwhile) until none holds the pool; then free.
 * Every access is seq-cst, an RMW, or a release store that the
 * destroyer's seq-cst load reads, so Promela's interleavings are exact.
 *
 * NC callers (spin -DNCONS=1..3; NCONS names the callers here).
 *
 * Verified (safety):
 *   - no caller uses the pool after destroy freed it;
 *   - destroy never waits for ever (an invalid end state).
 *
 * Seeded bugs:
 *   -DBUG_STATE_FIRST  the caller loads the state before it stores its
 *                      slot: destroy's scan can miss it, and it uses the
 *                      freed pool (assertion).
 *   -DBUG_FLAT_DEPTH   a nested call's exit clears the slot although the
 *                      outer call is still inside (assertion).
 */
#ifndef NCONS
#define NCONS 2
#endif
#ifndef SLOTS
#define SLOTS 1
#endif
#ifndef NEST
#define NEST 1
#endif

bit dead = 0;
bit freed = 0;
byte users = 0;
bit slot[NCONS];
byte ndepth[NCONS];

inline use() { assert(!freed) }

inline enter(me, ok) {
#if SLOTS
    if
    :: slot[me] ->
        /* nested: already inside; the state decides */
        if
        :: dead -> ok = 0
        :: else -> ndepth[me]++; ok = 1
        fi
    :: else ->
#ifdef BUG_STATE_FIRST
        ok = !dead;
        slot[me] = 1;
#else
        slot[me] = 1;
        ok = !dead;
#endif
        if
        :: ok -> ndepth[me] = 1
        :: else -> slot[me] = 0
        fi
    fi
#else
    users++;
    ok = !dead;
    if
    :: !ok -> users--
    :: else
    fi
#endif
}

inline leave(me) {
#if SLOTS
#ifdef BUG_FLAT_DEPTH
    ndepth[me] = 0;
    slot[me] = 0
#else
    ndepth[me]--;
    if
    :: ndepth[me] == 0 -> slot[me] = 0
    :: else
    fi
#endif
#else
    users--
#endif
}

proctype Caller(byte me) {
    bit ok = 0;
    bit ok2 = 0;
    enter(me, ok);
    if
    :: ok ->
        use();
#if NEST
        enter(me, ok2);
        if
        :: ok2 -> use(); leave(me)
        :: else
        fi;
        use();
#endif
        leave(me)
    :: else
    fi
}

proctype Destroyer() {
    byte i;
    dead = 1;
    users == 0;
    i = 0;
    do
    :: i < NCONS ->
        if
        :: slot[i] == 0 -> i++
        :: else -> (slot[i] == 0); i = 0 /* wait, scan again */
        fi
    :: else -> break
    od;
    freed = 1
}

init {
    atomic {
        byte k = 0;
        do
        :: k < NCONS -> run Caller(k); k++
        :: else -> break
        od;
        run Destroyer()
    }
}
