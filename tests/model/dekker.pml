/* dekker.pml: the "dekker" claim discipline over the lane core.
 *
 * Mirrors
 *   proctype Producer  runtime/carpet.c:knit__carpet_publish (shadow of
 *                      worker_bits reloaded only when exhausted, highest free
 *                      lane, slot, release store of host_bits); dekker has no
 *                      publish or flush hook.
 *   proctype Consumer  sched/dekker.c:knit__dekker_claim: pending from two
 *                      acquire loads; a region with pending lanes (by default
 *                      any such region, a superset of what the hint in the C
 *                      code can pick; -DHINT picks it as the C code does:
 *                      from home onwards, avoiding peer intents, then senior
 *                      intents); seq-cst store of the intent word; seq-cst
 *                      loads of the live seniors (one wants the region:
 *                      withdraw); knit__dekker_junior_wants (re-reads the
 *                      liveness mask, waits while a live junior wants the
 *                      region); take = pending lanes of the region (two more
 *                      loads); the walk of knit__dekker_oldest; one retire;
 *                      then the release clear of the intent.
 *   proctype Flusher   (-DBUG_NOFENCE only) the store buffer of a consumer
 *                      draining to memory at any time.
 *   proctype Reaper    (-DDEATH) runtime/carpet.c:knit__carpet_consumer_dead
 *                      -> sched/dekker.c:knit__dekker_consumer_dead, clearing
 *                      the live bit of a consumer that died.
 *
 * NCONS consumers (spin -DNCONS=1..3), NREG = NCONS regions (the minimum the
 * C code accepts) of RL lanes each (-DRL=1 or 2), NPUB publications.
 *
 * Weak memory: the intent store and the peer loads after it are seq-cst,
 * so in the correct model the store reaches memory before the loads (SC).
 * -DBUG_NOFENCE removes that StoreLoad order: the intent store goes into a
 * per-consumer store buffer (TSO) that a Flusher drains at any time, and
 * that the retire (a locked RMW on x86) drains; peer loads read memory.
 *
 * Verified (safety run: assertions + invalid end states):
 *   - mutual exclusion per region: no two consumers visit one region at
 *     once (ghost owner per region);
 *   - no lane claimed twice: a visited lane is in flight and holds a task
 *     not claimed before;
 *   - no published lane lost / no deadlock: the producer ends waiting for
 *     every task claimed and retired, then asserts each claimed once; a
 *     consumer left waiting for a junior is an invalid end state;
 *   - -DDEATH: the most junior consumer may die after its intent store
 *     (intent left set, nothing visited); seniors must not wait for it
 *     forever once it is declared dead.
 *   -DCHECK_OLDEST (not in the suite, see the report) asserts that the
 *     walk visits the tasks of a region in publication order.
 * Progress run (-DHINT, pan -DNP, weak fairness): no cycle without a claim
 * while work is pending (progress label on the visit, the idle wait of a
 * consumer blocks).
 *
 * Seeded bug:
 *   -DBUG_NOFENCE   the intent store is buffered (no StoreLoad fence): two
 *                   consumers both miss each other and claim one region.
 *   -DBUG_STALE_LIVE (with -DDEATH) the junior wait uses the liveness mask
 *                   read at the start of the claim: a senior waits forever
 *                   for a dead junior (invalid end state).
 */
#ifndef NCONS
#define NCONS 2
#endif
#define NREG NCONS
#ifndef RL
#define RL 1
#endif
#define NLANES (NREG * RL)
#ifndef NPUB
#define NPUB (NLANES + 2)
#endif
#define ALL ((1 << NLANES) - 1)
#define RBITS ((1 << RL) - 1)
#define LANES(r) (RBITS << ((r) * RL))

byte host_bits;            /* producer only */
byte worker_bits;          /* consumers only (atomic xor) */
byte slot[NLANES];         /* task id in the slot of each lane; 0 = none */
byte want[NCONS];          /* intent words: a region bit, or 0 */
byte live = (1 << NCONS) - 1;   /* liveness mask */
byte owner[NREG];          /* ghost: consumer id + 1 inside the region */
byte claimed[NPUB + 1];    /* ghost */
byte nclaimed;             /* ghost */
#ifdef BUG_NOFENCE
byte sbuf[NCONS];          /* store buffer: the pending intent store */
bool sfull[NCONS];
#endif
#ifdef DEATH
bool died;
#endif

#define in_flight(l) (((host_bits ^ worker_bits) >> (l)) & 1)

#ifdef BUG_NOFENCE
inline store_want(v) { atomic { sbuf[me] = v; sfull[me] = 1 } }
inline drain() { if :: sfull[me] -> want[me] = sbuf[me]; sfull[me] = 0 :: else fi }
#else
inline store_want(v) { want[me] = v }
inline drain() { skip }
#endif

active proctype Producer() {
    byte host_local = 0, shadow = 0, freel, lane, npub = 0, i;
    do
    :: npub < NPUB ->
retry:
        freel = ~(host_local ^ shadow) & ALL;
        if
        :: freel == 0 ->
            shadow = worker_bits;            /* reload, acquire */
            freel = ~(host_local ^ shadow) & ALL;
            if
            :: freel == 0 -> (worker_bits != shadow); goto retry   /* EAGAIN */
            :: else
            fi
        :: else
        fi;
        lane = NLANES - 1;
        do
        :: ((freel >> lane) & 1) -> break
        :: else -> lane--
        od;
        atomic {
            assert(!in_flight(lane));
            slot[lane] = npub + 1;           /* plain stores */
        }
        host_local = host_local ^ (1 << lane);
        host_bits = host_local;              /* release */
        npub++
    :: else -> break
    od;
    (nclaimed == NPUB && host_bits == worker_bits);
    i = 1;
    do
    :: i <= NPUB -> assert(claimed[i] == 1); i++
    :: else -> break
    od
}

proctype Consumer(byte me) {
    byte pend, region, done, j, at, step, lv;
#ifdef HINT
    byte peer, senior, k, pass;
#endif
end_idle:
    do
    :: (host_bits ^ worker_bits) != 0 ->      /* a poll that finds work */
#ifdef HINT
        pend = host_bits;                    /* acquire */
        atomic {
            pend = pend ^ worker_bits;       /* acquire */
            if
            :: pend == 0 -> goto again
            :: else
            fi;
            lv = live                        /* acquire */
        }
        peer = 0; senior = 0; j = 0;
        do                                   /* relaxed loads of intents */
        :: j < NCONS ->
            if
            :: j != me && ((lv >> j) & 1) ->
                atomic {
                    peer = peer | want[j];
                    if :: j < me -> senior = senior | want[j] :: else fi
                }
            :: else
            fi;
            j++
        :: else -> break
        od;
        atomic {
            region = NREG; pass = 0;
            do
            :: pass < 2 && region == NREG ->
                k = 0;
                do
                :: k < NREG ->
                    j = ((me * NREG) / NCONS + k) % NREG;   /* home + k */
                    if
                    :: (pend & LANES(j)) &&
                       !((((pass == 0) -> peer : senior) >> j) & 1) ->
                        region = j; break
                    :: else -> k++
                    fi
                :: else -> break
                od;
                pass++
            :: else -> break
            od;
            peer = 0; senior = 0; k = 0; pass = 0; j = 0;
            if
            :: region == NREG -> goto again  /* all wanted by seniors */
            :: else
            fi
        }
#else
        lv = live;                           /* acquire */
        /* Any region: a superset of what the hint can pick from the two
         * (possibly stale) loads of host_bits and worker_bits. */
        if
        :: region = 0
#if NREG > 1
        :: region = 1
#endif
#if NREG > 2
        :: region = 2
#endif
        fi;
#endif
        store_want(1 << region);                  /* seq-cst store (the fence) */
        j = 0;
        do                                   /* seq-cst loads of seniors */
        :: j < me ->
            if
            :: ((lv >> j) & 1) && (want[j] & (1 << region)) ->
                store_want(0);               /* a senior wants it: withdraw */
                goto again
            :: else -> j++
            fi
        :: else -> break
        od;
#ifdef DEATH
        if
        :: me == NCONS - 1 && !died -> died = 1; goto dead
        :: else
        fi;
#endif
        /* knit__dekker_junior_wants: while a live junior wants the region,
         * relax and look again (polling an unchanged word is a stutter). */
juniors:
#ifndef BUG_STALE_LIVE
        lv = live;                           /* re-read each time */
#endif
        j = me + 1;
        do
        :: j < NCONS ->
            if
            :: ((lv >> j) & 1) && (want[j] & (1 << region)) ->
#ifdef BUG_STALE_LIVE
                !(want[j] & (1 << region));
#else
                (!(want[j] & (1 << region)) || !((live >> j) & 1));
#endif
                goto juniors
            :: else -> j++
            fi
        :: else -> break
        od;
        atomic {
            assert(owner[region] == 0);      /* mutual exclusion (ghost) */
            owner[region] = me + 1;
            pend = host_bits                 /* take: acquire loads */
        }
        atomic {
            pend = (pend ^ worker_bits) & LANES(region);
            if
            :: pend == 0 -> owner[region] = 0; store_want(0); goto again
            :: else
            fi
        }
        /* The walk, oldest first (knit__dekker_oldest), in one step: the
         * region is ours until the clear. */
        atomic {
#if RL == 1
            at = region;
#else
            at = (pend >> (region * RL)) & RBITS;          /* lanes */
            j = (((at >> 1) | (at << (RL - 1))) & RBITS);  /* preds */
            j = at & ~j;                                   /* oldest */
            at = region * RL + RL - 1;
            do
            :: j != 0 && !((j >> (at - region * RL)) & 1) -> at--
            :: else -> break
            od;
#endif
            done = 0; step = 0; j = 0;
            do
            :: step < RL && pend ->
                if
                :: (pend >> at) & 1 ->
                    assert(in_flight(at));
                    assert(slot[at] != 0 && claimed[slot[at]] == 0);
#ifdef CHECK_OLDEST
                    assert(slot[at] > j);    /* publication order */
#endif
                    j = slot[at];
                    claimed[slot[at]]++;
                    nclaimed++;
                    pend = pend ^ (1 << at);
                    done = done | (1 << at)
                :: else
                fi;
                at = ((at == region * RL) -> region * RL + RL - 1 : at - 1);
                step++
            :: else -> break
            od;
            at = 0; step = 0; j = 0
        }
progress_claim:
        atomic {                             /* retire: a locked RMW */
            drain();
            worker_bits = worker_bits ^ done;
            done = 0;
            owner[region] = 0
        }
        store_want(0);                       /* release clear, after retire */
again:
        atomic { pend = 0; region = 0; lv = 0; j = 0 }
    od;
#ifdef DEATH
dead:
end_dead:
    skip
#endif
}

#ifdef BUG_NOFENCE
proctype Flusher(byte me) {
end:
    do
    :: atomic { sfull[me] -> want[me] = sbuf[me]; sfull[me] = 0 }
    od
}
#endif

#ifdef DEATH
active proctype Reaper() {
end_wait:
    died;
    live = live & ~(1 << (NCONS - 1))       /* knit__dekker_consumer_dead */
}
#endif

init {
    byte i = 0;
    atomic {
        do
        :: i < NCONS ->
            run Consumer(i);
#ifdef BUG_NOFENCE
            run Flusher(i);
#endif
            i++
        :: else -> break
        od
    }
}
