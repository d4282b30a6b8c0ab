/* carpet_handover.pml: carpets changing hands between producers (issue 18),
 * and the wait for space that a submit with no carpet falls into.
 *
 * Mirrors
 *   proctype Producer  one per submitting thread:
 *                      A (RA): holds carpets 0 and 1 (with PRE tasks of an
 *                      earlier burst in flight), publishes NA more, then
 *                      goes idle holding them (the process ends, hold FREE)
 *                      or, nondeterministically, exits: runtime/submit.c:
 *                      knit__tls_entry_orphan (pool lock; every carpet to the
 *                      spares by knit__carpet_give_back; no hold CAS: the
 *                      owner is the exiting thread itself);
 *                      B (RB): the busy one, holds carpet 2 and submits NB
 *                      tasks in a row;
 *                      C (RC): the late one, no carpet, submits NC tasks,
 *                      starting at any point of the run.
 *                      Every completed submit passes the progress label:
 *                      A and B submit finitely often, so a run with
 *                      finitely many progress steps is one where C never
 *                      completes (or A or B never does).
 *   inline enqueue     runtime/submit.c:knit__enqueue (KNIT_BLOCK, outside
 *                      thread): knit__publish until it returns 0, else
 *                      knit__space_wait(carpet = true) and again.
 *   inline publish     knit__publish: knit__hold_enter (CAS FREE -> OWNER,
 *                      spinning: a guard that blocks while hold is not
 *                      FREE), knit__publish_held (own carpets in list order,
 *                      else knit__carpet_take), knit__hold_exit (release
 *                      store of FREE).
 *   pub_a, pub_b       runtime/carpet.c:knit__carpet_publish on one carpet:
 *                      (a) free lanes from host_bits and worker_bits (the
 *                      shadow, reloaded when exhausted: lane.pml checks the
 *                      shadow; a stale one only hides free lanes), highest
 *                      free lane; (b) the slot, then the release store that
 *                      toggles the lane in host_bits.
 *   inline carpet_take knit__carpet_take: pool lock (a mutex), then
 *                      knit__spare_take (first spare with a free lane), then
 *                      (no knit__carpet_create: the registry is at its cap
 *                      from the start) knit__carpets_reclaim and
 *                      knit__spare_take again; the carpet goes to the end of
 *                      the caller list (the caller holds its own hold).
 *   reclaim (in it)    knit__carpets_reclaim: pass 0 moves the empty carpets
 *                      beyond the first RESERVE of each record, pass 1 (only
 *                      if pass 0 moved none) every carpet with a free lane;
 *                      per record: CAS hold FREE -> TAKER (acquire; a held
 *                      record is skipped, never waited for), then the moves
 *                      (knit__carpet_give_back: swap with the last entry)
 *                      and the release store of FREE.
 *   inline space_wait  knit__space_wait(carpet = true), outside thread:
 *                      acquire load of space_seq, seq-cst RMW of
 *                      space_waiters, futex wait on space_seq with the value
 *                      loaded, with a 1 ms timeout (see below), decrement.
 *   proctype Worker    runtime/pool.c:knit__find / knit__claim_into: claims
 *                      a lane in flight on any carpet (the registry: spares
 *                      included) and retires it (the claim disciplines are
 *                      lane/ticket/dekker.pml), seq-cst RMW of counts, then
 *                      knit__space_notify: seq-cst load of space_waiters; if
 *                      not 0, bump space_seq and futex wake all. An idle
 *                      worker waits until some lane is in flight (parking
 *                      without lost wake-ups is doorbell.pml).
 *
 * Steps. The words shared here are accessed with seq-cst operations, RMWs,
 * or acquire/release pairs that a lock or a hold orders, so interleaving
 * is exact for them (-DBUG_EARLY_RELEASE makes the one reorder a relaxed
 * release of hold allows explicit). To keep the search small, steps that
 * nobody else can observe apart are merged, each for a stated reason:
 *   - hold_enter and the scan of the own list with (a) on each carpet: once
 *     hold is ours nobody else touches the list, and worker_bits only ever
 *     frees lanes (a later read can only find more);
 *   - the pool lock with knit__spare_take; the moves of a record with the
 *     release of its hold; the last knit__spare_take, the append, the
 *     unlock and (a) on the carpet taken: the lock or the hold excludes
 *     everyone else. The CAS of each record stays a step of its own (TAKER
 *     is visible: an owner that tries to publish blocks in hold_enter), and
 *     so do (b) and hold_exit (the window between the publication and the
 *     release, knit__carpet_flush in the C code, is there);
 *   - the load of space_seq, the waiters RMW and the futex check: since a
 *     notifier bumps and wakes in one step (below), a bump between the
 *     load and the check ends in the same wake-up as a bump after it;
 *   - a claim with its retire, the waiters load and the bump and wake: the
 *     wake-up that matters is lost between the failed publish and the
 *     waiters RMW, and that window is still there.
 * Two workers add no state: between claims a worker has none (its claim is
 * one step), so the suite runs NCONS = 1.
 *
 * The 1 ms timeout of the space wait. The C code needs it, by design and
 * in places its comments do not name: (1) knit__space_wait loads space_seq
 * after the failed publish and, for a carpet, does not re-check after its
 * waiters RMW, so a claim that retires a lane between the failed publish
 * and that RMW sees no waiter and rings nothing; (2) carpets also become
 * available without a claim: an owner the taker skipped releases hold, an
 * exiting thread gives its carpets back; neither rings space_seq. So the
 * timeout is modelled as what it is, a periodic re-check: a sleeping
 * waiter may always return, and weak fairness makes it return eventually,
 * as the 1 ms bound does. That cannot hide the hang of the issue: a waiter
 * that re-checks for ever and never finds a carpet is a non-progress cycle
 * (which is what -DBUG_NO_TAKER shows). -DNO_TIMEOUT removes the timeout
 * (futex wait without one) and must fail: the timeout is load-bearing
 * (see -DWAIT_FIX for what would make it a mere backstop).
 *
 * Scenario: NCARP = 3 carpets of LANES = 2 lanes, all created (the registry
 * is at its cap): A owns carpets 0 and 1, B owns carpet 2, C owns none, no
 * spares. RESERVE = 1 (KNIT__CARPET_RESERVE is 2 in the C code; 1 here so
 * that pass 0 has something to take from A with 3 carpets). NCONS workers
 * (spin -DNCONS=1..2); PRE, NA, NB, NC tasks (defaults 2, 1, 1, 1: A
 * publishes while C may take from it). -DPRE=4 -DNA=0 -DNB=2 (the suite
 * rows "full") is the situation of the issue: every carpet has every lane
 * in flight when C arrives, A is idle from the start, and C is served only
 * once the workers free lanes of carpets that another thread holds.
 *
 * Verified (safety run: assertions + invalid end states):
 *   - one producer per carpet: no carpet is between (a) and (b) of two
 *     publishes at once (ghost pubing), and the carpet written at (b) is in
 *     the writer list (never two owners at once); every carpet is in
 *     exactly one list (a record or the spares) after every move;
 *   - no lane published twice while in flight: (b) writes only a lane that
 *     is not in flight, into a slot with no unclaimed task;
 *   - every published task is claimed exactly once: a claim takes a task
 *     not claimed before; init ends waiting until the producers are done
 *     and all PRE + NA + NB + NC tasks are claimed, then checks each once;
 *     a lost task or a producer asleep for ever is an invalid end state.
 * Progress run (pan -DNP, -l -f: weak fairness): no cycle in which the late
 * submit never completes. In every run a carpet with a free lane owned by
 * a thread that is not publishing comes back (the workers claim every
 * task, A idles or exits, B finishes), so this is the property of the
 * issue: no submit waits while such a carpet exists.
 *
 * Seeded bugs:
 *   -DBUG_NO_HOLD       the taker does not CAS hold: it moves carpets of a
 *                       record whose owner is publishing into them, and two
 *                       producers write one carpet (safety).
 *   -DBUG_NO_TAKER      the old behaviour: a submit uses its own carpets
 *                       and spares only (and new ones up to the cap, reached
 *                       here): C waits for ever while A sits on free lanes,
 *                       a non-progress cycle (np run).
 *   -DBUG_EARLY_RELEASE the owner releases hold before (b) of its publish
 *                       (what a relaxed store of FREE, or a release placed
 *                       too early, allows): a taker moves the carpet and its
 *                       new owner writes it too (safety).
 *   -DNO_TIMEOUT        a change to the C code, not a seeded bug of the
 *                       model: the carpet wait without its 1 ms bound sleeps
 *                       for ever (invalid end state, safety run).
 * Not in the suite (a proposed change, not the C code):
 *   -DWAIT_FIX          with -DNO_TIMEOUT passes safety and progress: after
 *                       a failed publish the submitter registers (waiters
 *                       RMW, then the space_seq load) BEFORE the next
 *                       attempt and unregisters after it, and hold_exit
 *                       wakes the waiters if space_waiters != 0 (this needs
 *                       a seq-cst store of FREE, or a fence, before that
 *                       load). Without the hold_exit wake-up it still hangs
 *                       (an owner skipped while its publication is claimed
 *                       before the waiter registers); a wake-up in
 *                       knit__tls_entry_orphan was not needed here.
 * (Comments here avoid apostrophes: spin runs the C preprocessor.)
 */
#ifndef NCONS
#define NCONS 2
#endif
#ifndef PRE
#define PRE 2
#endif
#ifndef NA
#define NA 1
#endif
#ifndef NB
#define NB 1
#endif
#ifndef NC
#define NC 1
#endif
#define NTASK (PRE + NA + NB + NC)
#define NCARP 3
#define LANES 2
#define FULL 3
#define NREC 3
#define RA 0
#define RB 1
#define RC 2
#define RESERVE 1
#define NONE 255
#define FREE 0
#define OWNER 1
#define TAKER 2

byte host[NCARP];          /* host_bits (the producer of the carpet) */
byte wb[NCARP];            /* worker_bits (consumers, xor) */
byte slot[NCARP * LANES];  /* task id in the slot; 0 = claimed or none */
byte hold[NREC];           /* knit__producer.hold */
byte mine[NREC * NCARP];   /* knit__producer.mine and nmine */
byte nmine[NREC];
byte spare[NCARP];         /* knit__pool.spare and nspare (pool lock) */
byte nspare;
bool lock;                 /* the pool lock */
byte waiters;              /* space_waiters */
bool asleep[NREC];         /* in the futex wait on space_seq */
byte pubing[NCARP];        /* ghost: writer id + 1 between (a) and (b) */
byte claimed[NTASK + 1];   /* ghost */
byte nclaimed;             /* ghost */
byte ndone;                /* ghost: producers done */

/* knit__space_notify: if someone waits, bump space_seq and wake all */
#define NOTIFY if :: waiters != 0 -> asleep[RA] = 0; asleep[RB] = 0; \
    asleep[RC] = 0 :: else fi
#define inflight(c) (host[c] ^ wb[c])
#define busy(c) ((inflight(c) & 1) + ((inflight(c) >> 1) & 1))

/* every carpet in exactly one list */
inline check_lists() {
    k = 0;
    do
    :: k < NCARP ->
        j = 0; n = 0;
        do
        :: j < NREC * NCARP ->
            if
            :: j % NCARP < nmine[j / NCARP] && mine[j] == k -> n++
            :: else
            fi;
            j++
        :: else -> break
        od;
        j = 0;
        do
        :: j < nspare -> if :: spare[j] == k -> n++ :: else fi; j++
        :: else -> break
        od;
        assert(n == 1);
        k++
    :: else -> break
    od;
    k = 0; j = 0; n = 0
}

/* runtime/submit.c:knit__carpet_give_back(p, r, i) */
inline give_back(r, i) {
    spare[nspare] = mine[r * NCARP + i];
    nspare++;
    mine[r * NCARP + i] = mine[r * NCARP + nmine[r] - 1];
    nmine[r]--;
    mine[r * NCARP + nmine[r]] = 0
}

/* (a) of knit__carpet_publish on c, inside an atomic step of the caller:
 * fr = free lanes; if one is free, c is being written from here on. */
inline pub_a(me, c) {
    fr = FULL & ~inflight(c);
    if
    :: fr != 0 ->
        assert(pubing[c] == 0);              /* one producer per carpet */
        pubing[c] = me + 1;
        lane = ((fr & 2) -> 1 : 0)           /* the highest free lane */
    :: else
    fi
}

/* (b): the slot, then the release store of host_bits. */
inline pub_b(me, c, t) {
    k = 0; n = 0;
    do
    :: k < nmine[me] ->
        if :: mine[me * NCARP + k] == c -> n = 1 :: else fi; k++
    :: else -> break
    od;
    assert(n == 1);                          /* c is in my list: one owner */
    assert(pubing[c] == me + 1);
    assert(((inflight(c) >> lane) & 1) == 0);    /* not in flight */
    assert(slot[c * LANES + lane] == 0);     /* no unclaimed task in it */
    slot[c * LANES + lane] = t;
    host[c] = host[c] ^ (1 << lane);
    pubing[c] = 0;
    ok = 1;
    k = 0; n = 0; fr = 0; lane = 0
}

/* knit__spare_take: the first spare with a free lane, out of the spares
 * (pool lock held), in c (else c unchanged). */
inline spare_take(c) {
    j = 0;
    do
    :: j < nspare ->
        if
        :: inflight(spare[j]) != FULL ->
            c = spare[j];
            nspare--;
            spare[j] = spare[nspare];
            spare[nspare] = 0;
            break
        :: else -> j++
        fi
    :: else -> break
    od;
    j = 0
}

/* next record for the reclaim, skipping self; after the last, next pass
 * (none after a pass that moved something, none after pass 1) */
inline next_rec(me) {
    r++;
    if :: r == me -> r++ :: else fi;
    if
    :: r >= NREC ->
        r = ((me == 0) -> 1 : 0);
        pass = ((moved > 0) -> 2 : pass + 1)
    :: else
    fi
}

/* knit__publish(p, me, task t), knit__hold_exit included: ok = 1 when
 * published. With no free lane in its own carpets, knit__carpet_take runs
 * here: pool lock, knit__spare_take, knit__carpets_reclaim (a CAS step per
 * record, and a step for its moves when the CAS won), knit__spare_take
 * again, the carpet to the end of the list, unlock; then (a) and (b) on
 * the carpet taken, which has a free lane. It leaves the loop of enqueue
 * when it has published. */
inline publish(me, t) {
    atomic {
        hold[me] == FREE -> hold[me] = OWNER; held = 1;   /* hold_enter */
        ok = 0; i = 0; fr = 0;
        do                                   /* knit__publish_held */
        :: i < nmine[me] && fr == 0 ->
            c = mine[me * NCARP + i];
            pub_a(me, c);
            i++
        :: else -> break
        od;
        i = 0
    };
    if
    :: fr != 0
    :: atomic {                              /* knit__carpet_take */
           fr == 0 && !lock -> lock = 1;     /* pool lock */
           c = NONE;
           spare_take(c);
           moved = 0;
           r = ((me == 0) -> 1 : 0);
#ifdef BUG_NO_TAKER
           pass = 2
#else
           pass = ((c == NONE) -> 0 : 2)
#endif
       };
       do                                    /* knit__carpets_reclaim */
       :: atomic {
              pass < 2 && !got ->
#ifdef BUG_NO_HOLD
              got = 1
#else
              if                             /* CAS FREE -> TAKER, acquire */
              :: hold[r] == FREE -> hold[r] = TAKER; got = 1
              :: else -> next_rec(me)        /* held: skipped */
              fi
#endif
          }
       :: atomic {
              got ->
              i = nmine[r];
              do
              :: i > ((pass == 0) -> RESERVE : 0) ->
                  i--;
                  c2 = mine[r * NCARP + i];
                  if
                  :: (pass == 0 && busy(c2) == 0) ||
                     (pass == 1 && busy(c2) < LANES) ->
                      give_back(r, i);
                      moved++
                  :: else
                  fi
              :: else -> break
              od;
              check_lists();
#ifndef BUG_NO_HOLD
              hold[r] = FREE;                /* release */
#endif
              i = 0; c2 = 0; got = 0;
              next_rec(me)
          }
       :: atomic {
              pass >= 2 ->
              if
              :: moved > 0 -> spare_take(c)
              :: else
              fi;
              if
              :: c != NONE ->
                  mine[me * NCARP + nmine[me]] = c;
                  nmine[me]++;
                  check_lists()
              :: else
              fi;
              lock = 0;                      /* unlock */
              moved = 0; pass = 0; r = 0;
              if
              :: c != NONE -> pub_a(me, c); assert(fr != 0)  /* a free lane */
              :: else
              fi;
              break
          }
       od
    fi;
#ifdef BUG_EARLY_RELEASE
    if
    :: fr != 0 -> hold[me] = FREE; held = 0  /* before the publish is done */
    :: else
    fi;
#endif
    if
    :: atomic { fr != 0 -> pub_b(me, c, t) } /* (b) */
    :: else                                  /* KNIT_EAGAIN */
    fi;
    atomic {                                 /* knit__carpet_flush, then */
        c = 0;
        if
        :: held -> hold[me] = FREE; held = 0 /* knit__hold_exit: release */
        :: else
        fi;
#ifdef WAIT_FIX
        NOTIFY;                              /* seq-cst load of waiters */
        if
        :: ok && reg -> waiters--; asleep[me] = 0; reg = 0
        :: else
        fi;
#endif
        if
        :: ok ->                             /* out of enqueue: done */
progress_submit:
            ok = 0; t++; break
        :: else
        fi
    }
}

/* knit__space_wait(p, me, carpet = true), outside thread */
#ifdef WAIT_FIX
/* registered before the attempt (see enqueue): sleep unless a wake-up
 * came since the registration (the futex word moved), then unregister */
inline space_wait(me) {
    atomic {
        if
        :: !asleep[me]                       /* woken since registering */
#ifndef NO_TIMEOUT
        :: asleep[me] -> asleep[me] = 0      /* the 1 ms timeout */
#endif
        fi;
        waiters--;
        reg = 0
    }
}
#else
inline space_wait(me) {
    atomic {
        waiters++;                           /* after the space_seq load */
        asleep[me] = 1                       /* futex wait: word unchanged */
    };
    atomic {
        if
        :: !asleep[me]                       /* woken */
#ifndef NO_TIMEOUT
        :: asleep[me] -> asleep[me] = 0      /* the 1 ms timeout: re-check */
#endif
        fi;
        waiters--
    }
}
#endif

/* knit__enqueue (KNIT_BLOCK): publish (which leaves the loop when it
 * published), else wait for space, and again. */
inline enqueue(me, t) {
    do
    :: publish(me, t);
#ifdef WAIT_FIX
       if
       :: !reg ->                            /* after the first failure */
           atomic { waiters++; asleep[me] = 1; reg = 1 }  /* then seq load */
       :: else -> space_wait(me)
       fi
#else
       space_wait(me)
#endif
    od
}

#define PRODUCER_LOCALS byte c, c2, i, j, k, n, r, fr, lane, pass, moved, t; \
    bool ok, held, got, reg

/* A (me = RA), B (RB) or C (RC): submits tasks first .. last. */
proctype Producer(byte me; byte first; byte last) {
    PRODUCER_LOCALS;
    t = first;
    do
    :: t <= last -> enqueue(me, t)
    :: else -> break
    od;
    if
    :: me == RA ->
        if
        :: skip                              /* idle for ever, holding */
        :: atomic {                          /* thread exit: orphan */
               !lock -> lock = 1;
               do
               :: nmine[RA] > 0 -> give_back(RA, 0)
               :: else -> break
               od;
               check_lists();
               lock = 0
           }
        fi
    :: else
    fi;
    ndone++
}

proctype Worker(byte me) {
    byte c, l, t;
end_idle:
    do
    :: atomic {
           (inflight(0) != 0 || inflight(1) != 0 || inflight(2) != 0) ->
           if
           :: inflight(0) != 0 -> c = 0
           :: inflight(1) != 0 -> c = 1
           :: inflight(2) != 0 -> c = 2
           fi;
           if
           :: inflight(c) & 1 -> l = 0
           :: inflight(c) & 2 -> l = 1
           fi;
           t = slot[c * LANES + l];
           assert(t != 0 && claimed[t] == 0);  /* claimed once */
           claimed[t]++;
           nclaimed++;
           slot[c * LANES + l] = 0;
           wb[c] = wb[c] ^ (1 << l);         /* retire (release xor) */
           /* counts RMW, then knit__space_notify */
           NOTIFY;
           c = 0; l = 0; t = 0
       }
    od
}

init {
    byte i = 0;
    atomic {
        mine[RA * NCARP + 0] = 0; mine[RA * NCARP + 1] = 1; nmine[RA] = 2;
        mine[RB * NCARP + 0] = 2; nmine[RB] = 1;
        do                                   /* the burst A published before */
        :: i < PRE ->
            slot[(i / LANES) * LANES + LANES - 1 - i % LANES] = i + 1;
            host[i / LANES] = host[i / LANES] | (1 << (LANES - 1 - i % LANES));
            i++
        :: else -> break
        od;
        i = 0;
        run Producer(RA, PRE + 1, PRE + NA);
        run Producer(RB, PRE + NA + 1, PRE + NA + NB);
        run Producer(RC, PRE + NA + NB + 1, NTASK);
        do
        :: i < NCONS -> run Worker(i); i++
        :: else -> break
        od;
        i = 0
    };
    (ndone == NREC && nclaimed == NTASK);    /* all submitted, all claimed */
    do
    :: i < NTASK -> i++; assert(claimed[i] == 1)
    :: else -> break
    od
}
