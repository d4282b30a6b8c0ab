/* submit_credits.pml: submit credits in the entry slot against destroy,
 * the bound and the workers.
 *
 * Mirrors
 *   proctype Caller    runtime/entry.c:knit__pool_enter (a sticky slot is
 *                      entered with a CAS that sets INSIDE; a free slot
 *                      with the store + state load of pool_enter.pml),
 *                      knit__pool_exit (sticky while credits remain and the
 *                      pool is LIVE, else the credits go back),
 *                      knit__entries_unlink (thread exit: the credits go
 *                      back), and runtime/submit.c:knit__pending_acquire:
 *                      the state check (acquire) after entering, a credit
 *                      used with a plain store of the slot word (read
 *                      first, written back later: the owner's word while
 *                      INSIDE), else a refill of K units (one RMW on
 *                      counts), the state re-check, K - 1 kept only if
 *                      pending + K <= MAX / 2 (the half rule), else K - 1
 *                      given back and the exact path; at the bound a
 *                      reclaim of the other callers' sticky slots, then a
 *                      wait for room (or for the pool to stop).
 *   proctype Worker    a claim (pending - 1), the task run (the pool must
 *                      not be freed), its settle (live - 1).
 *   proctype Destroyer runtime/pool.c:knit_pool_destroy: DRAINING, then
 *                      rounds of knit__entries_revoke (every sticky slot,
 *                      INSIDE clear, emptied by a CAS and its credits
 *                      subtracted) and knit__pool_quiescent (live == 0);
 *                      DEAD; knit__entries_wait_out (no slot holds the
 *                      pool); free.
 * Slot words and counts are single Promela variables updated in one step
 * where the C code uses one atomic word (pend and live are the two halves
 * of knit__pool.counts). Every C access in the protocol is seq-cst, an
 * RMW, or an owner's store of a word nobody else may write meanwhile, so
 * interleavings are exact.
 *
 * NCONS callers, each R rounds of (enter, S submits, exit), then it exits the
 * thread or stays idle for ever with whatever its slot keeps. MAX is
 * max_pending, K the units of a refill.
 *
 * Verified (safety):
 *   - no task runs and no caller is inside after the pool is freed;
 *   - no submit that began after DRAINING is accepted;
 *   - no more than MAX tasks are ever published and unclaimed;
 *   - pend and live never go below 0 (an assertion on every subtraction);
 *   - no invalid end state: destroy never waits for ever, and (with
 *     -DLATE_DESTROY, destroy only after every caller is done) no
 *     submitter waits at the bound for ever.
 *
 * Seeded bugs:
 *   -DBUG_REVOKE_INSIDE   the revoke empties a slot that is INSIDE: the
 *                         owner's later store of its word brings back
 *                         credits already subtracted.
 *   -DBUG_EXIT_DROPS      the exit clears the slot without giving its
 *                         credits back: destroy waits for ever.
 *   -DBUG_NO_STATE_CHECK  a credit is used without the state check: a
 *                         submit after DRAINING is accepted.
 *   -DBUG_NO_ROOM         a refill keeps K - 1 credits without the room
 *                         check: tasks are accepted above the bound.
 *   -DBUG_CAS_RELOAD      the sticky enter reloads the slot after the find
 *                         and CASes it without testing that it still holds
 *                         the pool: a revoke emptied it meanwhile, the CAS
 *                         sets INSIDE on an empty slot, destroy's wait-out
 *                         does not see the caller and frees under it (a
 *                         draft of entry.c had this; found by a second
 *                         model of the protocol).
 *   -DBUG_NO_STATE_RECHECK (with -DFUTEX) the waiter at the bound does not
 *                         load the state after it counts itself as a
 *                         waiter: a destroy that stored DRAINING and rang
 *                         space_seq before the waiter's load of seq is
 *                         missed, pending still looks full (held up by the
 *                         refill units of other submitters that then see
 *                         DRAINING and undo, so no claim rings) and the
 *                         waiter sleeps for ever (in C: until its 1 ms
 *                         timeout). Found with 3 callers at MAX 4 (the
 *                         units of two refills fill the bound) and with 2
 *                         callers at MAX 2 (one refill fills it); not with
 *                         2 callers at MAX 4 (one caller holds at most K
 *                         units in flight and K - 1 credits), nor with
 *                         LATE_DESTROY (nobody waits when destroy comes).
 * Variants that pass: -DNO_HALF (credits up to the full bound) and
 * -DNO_RECLAIM, also both together with idle holders and LATE_DESTROY.
 * The bound stays live without either: a refill keeps credits only if
 * pending + K <= ROOM <= MAX, so credits alone never fill the bound, and a
 * submitter that waits there waits for a real task, which a worker
 * claims. (This model's wait is woken by any change; the C wait sleeps on
 * a futex that a claim rings only once pending is at space_low, 7/8 of
 * the bound, or after 1 ms. The half rule keeps all credits at or below
 * half the bound, under space_low, so the claims of the real tasks ring
 * it; without the rule, idle holders could keep pending above space_low
 * and the waiter would run on its 1 ms timeout.) The reclaim is for
 * exactness: idle threads' credits do not count against the bound.
 *
 * -DFUTEX replaces that abstract wait with the futex wait of
 * runtime/submit.c:knit__space_wait for a submitter outside the pool (no
 * lane waiter, no worker): after the reclaim, the state load of
 * knit__pending_acquire (refused if not LIVE), then seq = space_seq,
 * space_waiters + 1, the state re-check (not LIVE: no sleep, back to the
 * refill, which finds the state and is refused), and only if pending >=
 * MAX a FUTEX_WAIT on space_seq == seq with NO timeout, so a wake-up that
 * is missed is an invalid end state; then space_waiters - 1. space_seq is
 * rung (incremented; the waiters' guard is the FUTEX_WAKE) by destroy
 * right after its DRAINING store (runtime/pool.c:knit_pool_destroy), and
 * by a claim as runtime/pool.c:knit__space_notify: after the claim's RMW,
 * a load of space_waiters, and a ring only if it is > 0 and pending after
 * the claim is at most SPACE_LOW (MAX - 1 here: max_pending -
 * max(max_pending / 8, 1)). The worker claims one task at a time (C
 * subtracts a batch in one RMW). Passes: 2 callers at MAX 2 (R=1 S=1,
 * R=1 S=2), 3 callers with LATE_DESTROY (claims alone ring every waiter,
 * no timeout needed), and 3 callers at MAX 4 without LATE_DESTROY (49M
 * states, 93 s, over the 4 GB of check_models.sh without -DCOLLAPSE:
 * checked by hand with pan built with -DCOLLAPSE).
 */
#ifndef NCONS
#define NCONS 2
#endif
#ifndef MAX
#define MAX 4
#endif
#ifndef K
#define K 2
#endif
#ifndef R
#define R 2
#endif
#ifndef S
#define S 2
#endif
#ifdef NO_HALF
#define ROOM MAX
#else
#define ROOM (MAX / 2)
#endif

#ifdef FUTEX
#ifndef SPACE_LOW
#define SPACE_LOW (MAX - 1) /* pool.c: max_pending - max(max_pending / 8, 1) */
#endif
#endif

#define LIVE 0
#define DRAINING 1
#define DEAD 2

byte state = LIVE;
bit freed = 0;
byte pend = 0;  /* counts, low half: pending (tasks + credits) */
byte live = 0;  /* counts, high half: live (tasks + credits) */
byte queue = 0; /* published, not claimed */
byte ncalled = 0; /* callers that finished */
/* slot word per caller: held (the handle), INSIDE, credits */
bit sh[NCONS];
bit si[NCONS];
byte sc[NCONS];
#ifdef FUTEX
byte space_seq = 0;     /* the futex word submitters at the bound sleep on */
byte space_waiters = 0; /* submitters inside knit__space_wait */
#endif

inline sub(n) {
    assert(pend >= (n) && live >= (n));
    pend = pend - (n);
    live = live - (n)
}

/* A revoke of slot j (destroy, a reclaim, thread exit): one CAS. */
inline revoke(j) {
    atomic {
#ifdef BUG_REVOKE_INSIDE
        if
        :: sh[j] && sc[j] > 0 ->
#else
        if
        :: sh[j] && !si[j] && sc[j] > 0 ->
#endif
            sub(sc[j]);
            sc[j] = 0; si[j] = 0; sh[j] = 0
        :: else
        fi
    }
}

inline revoke_all() {
    j = 0;
    do
    :: j < NCONS -> revoke(j); j++
    :: else -> break
    od
}

proctype Worker() {
#ifdef FUTEX
    byte np; /* pending after the claim (from the RMW's old value) */
#endif
end:
    do
    :: atomic { queue > 0 -> queue--; assert(pend > 0); pend--
#ifdef FUTEX
                ; np = pend
#endif
       };
#ifdef FUTEX
       /* knit__space_notify: the load of space_waiters (seq-cst), then
        * the ring (increment; the FUTEX_WAKE is the blocked waiters'
        * guard becoming true) only at or below space_low. */
       if
       :: space_waiters > 0 && np <= SPACE_LOW -> atomic { space_seq++ }
       :: else
       fi;
       np = 0;
#endif
       assert(!freed);
       atomic { assert(live > 0); live-- }
    od
}

proctype Caller(byte me) {
    byte r = 0, s, n, lc, j;
#ifdef FUTEX
    byte myseq;
#endif
    bit ok, after, found;
    do
    :: r < R ->
        /* enter: knit__slot_find sees a sticky slot, then the CAS */
        ok = 0;
        found = sh[me];
        atomic {
            if
#ifdef BUG_CAS_RELOAD
            :: found && !si[me] -> si[me] = 1; ok = 1 /* CAS of a reloaded 0 */
#else
            :: found && sh[me] && !si[me] -> si[me] = 1; ok = 1 /* sticky: CAS won */
#endif
            :: else
            fi
        }
        if
        :: !ok -> atomic { sh[me] = 1; si[me] = 1; sc[me] = 0 } /* free slot: store */
        :: else
        fi;
        /* the state load (seq-cst) */
        if
        :: state == DEAD ->
            if
            :: sc[me] > 0 -> atomic { sub(sc[me]); sc[me] = 0 }
            :: else
            fi;
            atomic { sh[me] = 0; si[me] = 0 };
            goto leave
        :: else
        fi;
        assert(!freed);
        s = 0;
        do
        :: s < S ->
            after = (state != LIVE); /* the submit begins */
            lc = sc[me];             /* the owner reads its word */
#ifndef BUG_NO_STATE_CHECK
            if
            :: state != LIVE -> goto refused
            :: else
            fi;
#endif
            if
            :: lc > 0 ->
#ifdef BUG_NO_STATE_CHECK
                skip;
#endif
                /* plain store of the owner's word */
                atomic { sh[me] = 1; si[me] = 1; sc[me] = lc - 1 };
                goto publish
            :: else
            fi;
#ifdef BUG_NO_STATE_CHECK
            if
            :: state != LIVE -> goto refused
            :: else
            fi;
#endif
refill:
            atomic { n = pend; pend = pend + K; live = live + K };
            if
            :: state != LIVE -> atomic { sub(K) }; goto refused
            :: else
            fi;
            if
#ifdef BUG_NO_ROOM
            :: true ->
#else
            :: n + K <= ROOM ->
#endif
                atomic { sh[me] = 1; si[me] = 1; sc[me] = K - 1 };
                goto publish
            :: else
            fi;
            atomic { sub(K - 1) };
            if
            :: n < MAX -> goto publish
            :: else
            fi;
            atomic { sub(1) };
#ifndef NO_RECLAIM
            revoke_all();
#endif
#ifdef FUTEX
            /* knit__pending_acquire: the state load (acquire) before the
             * wait, then knit__space_wait */
            if
            :: state != LIVE -> goto refused
            :: else
            fi;
            myseq = space_seq;           /* 1: seq (acquire) */
            atomic { space_waiters++ };  /* 2: a waiter (seq-cst RMW) */
#ifndef BUG_NO_STATE_RECHECK
            if
            :: state != LIVE -> goto unwait /* 3: stopping: no sleep */
            :: else
            fi;
#endif
            if
            :: pend >= MAX ->            /* 4: counts (seq-cst), full */
                /* FUTEX_WAIT on space_seq == seq, no timeout */
                atomic {
                    if
                    :: space_seq != myseq -> skip /* returns at once */
                    :: else -> (space_seq != myseq) /* blocks until rung */
                    fi
                }
            :: else                      /* sched_yield */
            fi;
unwait:
            atomic { space_waiters--; myseq = 0 }; /* 5 */
            goto refill;
#else
            /* wait for room; destroy's wake ends the wait too */
            (pend < MAX || state != LIVE);
            goto refill;
#endif
publish:
            assert(!after);
            assert(!freed);
            queue++;
            assert(queue <= MAX);
refused:
            s++
        :: else -> break
        od;
        /* exit: sticky while credits remain and the pool is LIVE */
        if
        :: sc[me] > 0 && state == LIVE -> si[me] = 0
        :: else ->
#ifndef BUG_EXIT_DROPS
            if
            :: sc[me] > 0 -> atomic { sub(sc[me]); sc[me] = 0 }
            :: else
            fi;
#endif
            atomic { sh[me] = 0; si[me] = 0; sc[me] = 0 }
        fi;
leave:
        r++
    :: else -> break
    od;
    atomic { ncalled++ };
    /* thread exit (its slots' credits go back), or idle for ever */
    if
    :: revoke(me)
    :: skip
    fi
}

proctype Destroyer() {
    byte j;
#ifdef LATE_DESTROY
    ncalled == NCONS;
#endif
    state = DRAINING;
#ifdef FUTEX
    /* Submitters blocked at the bound see the new state and leave: the
     * ring of space_seq (seq-cst increment, then FUTEX_WAKE). */
    atomic { space_seq++ };
#endif
    do
    :: revoke_all();
       if
       :: live == 0 -> break
       :: else ->
           /* the next round: after a settle or a slot that can be revoked */
           j = 0;
           (live == 0 || (sh[0] && !si[0] && sc[0] > 0)
#if NCONS > 1
            || (sh[1] && !si[1] && sc[1] > 0)
#endif
#if NCONS > 2
            || (sh[2] && !si[2] && sc[2] > 0)
#endif
           )
       fi
    od;
    state = DEAD;
    /* wait until no slot holds the pool */
    (!sh[0]
#if NCONS > 1
     && !sh[1]
#endif
#if NCONS > 2
     && !sh[2]
#endif
    );
    freed = 1
}

init {
    atomic {
        byte k = 0;
        do
        :: k < NCONS -> run Caller(k); k++
        :: else -> break
        od;
        run Worker();
        run Destroyer()
    }
}
