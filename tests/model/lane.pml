/* lane.pml: the lane core ("carpet") publish/retire protocol with the
 * producer's shadow copy of worker_bits.
 *
 * Mirrors
 *   proctype Producer  runtime/carpet.c:knit__carpet_publish (free lanes from
 *                      ~(host_local ^ worker_shadow); reload of the shadow,
 *                      once, only when it shows no free lane; the highest
 *                      free lane; slot written with plain stores, then the
 *                      release store of host_bits). The caller retrying on
 *                      KNIT_EAGAIN is modelled as waiting until worker_bits
 *                      differs from the shadow (polling an unchanged word is
 *                      a stutter). knit__carpet_flush has no effect on the
 *                      lane words here (its discipline hook is checked in
 *                      ticket.pml, its doorbell in doorbell.pml).
 *   proctype Consumer  sched/single.c:knit__single_claim run over a static
 *                      partition (consumer i owns the lanes l with
 *                      l % NCONS == i): acquire loads of host_bits and
 *                      worker_bits (two loads), copy each owned pending slot
 *                      out, then one knit_carpet_retire (release xor) per
 *                      claim. The partition gives each lane one owner by
 *                      construction, so this model checks the carpet alone;
 *                      the arbitrating disciplines are ticket.pml and
 *                      dekker.pml.
 *
 * NCONS consumers (spin -DNCONS=1..3), NLANES = NCONS + 1 lanes (so the
 * producer runs out of lanes and must reload its shadow), NPUB publications.
 *
 * Verified (safety run: assertions + invalid end states):
 *   - no lane claimed twice: each publication (task id in the slot) is
 *     copied out exactly once, and only while its lane is in flight;
 *   - the producer never writes a slot that is in flight or that a consumer
 *     is still reading (a stale shadow shows only false-busy lanes);
 *   - no published lane lost: the producer ends by waiting until every
 *     publication was claimed and host_bits == worker_bits, then asserts
 *     each task was claimed exactly once; a lost lane leaves it blocked,
 *     an invalid end state;
 *   - no deadlock: every process ends at an end label.
 *
 * Seeded bugs (weak memory made explicit as a nondeterministic reorder of
 * what the missing release would have ordered):
 *   -DBUG_PUBLISH_FIRST  host_bits stored relaxed: the slot write may land
 *                        after the store that publishes it, so a consumer
 *                        copies out the previous task (claimed twice).
 *   -DBUG_RETIRE_FIRST   retire xor relaxed: the slot reads of a consumer
 *                        may happen after its retire, so the producer reuses
 *                        the lane and overwrites a slot still being read.
 * (Comments here avoid apostrophes: spin runs the C preprocessor.)
 */
#ifndef NCONS
#define NCONS 2
#endif
#define NLANES (NCONS + 1)
#ifndef NPUB
#define NPUB (NLANES + 2)
#endif
#define ALL ((1 << NLANES) - 1)

byte host_bits;            /* written only by the producer */
byte worker_bits;          /* written only by consumers (atomic xor) */
byte slot[NLANES];         /* task id in the slot of the lane, 0 = none */
bool reading[NLANES];      /* ghost: a consumer owns the lane, still reading */
byte claimed[NPUB + 1];    /* ghost: times task t was copied out */
byte nclaimed;             /* ghost */

#define in_flight(l) (((host_bits ^ worker_bits) >> (l)) & 1)

/* Writes task id t into the slot of lane l; nobody may be reading it. */
inline write_slot(l, t) {
    atomic {
        assert(!in_flight(l));
        assert(!reading[l]);
        slot[l] = t
    }
}

active proctype Producer() {
    byte host_local = 0, shadow = 0, freel, lane, npub = 0, i;
    do
    :: npub < NPUB ->
retry:
        freel = ~(host_local ^ shadow) & ALL;
        if
        :: freel == 0 ->
            /* Reload once, acquire: pairs with the release xor of retire. */
            shadow = worker_bits;
            freel = ~(host_local ^ shadow) & ALL;
            if
            :: freel == 0 ->
                /* KNIT_EAGAIN: the caller retries. Polling an unchanged
                 * worker_bits is a stutter: wait for it to change. */
                (worker_bits != shadow);
                goto retry
            :: else
            fi
        :: else
        fi;
        /* The highest free lane (31 - clz). */
        lane = NLANES - 1;
        do
        :: ((freel >> lane) & 1) -> break
        :: else -> lane--
        od;
        host_local = host_local ^ (1 << lane);
#ifdef BUG_PUBLISH_FIRST
        if
        :: write_slot(lane, npub + 1);
           host_bits = host_local
        :: host_bits = host_local;      /* reordered before the slot */
           write_slot(lane, npub + 1)
        fi;
#else
        write_slot(lane, npub + 1);
        host_bits = host_local;         /* release: publishes the slot */
#endif
        npub++
    :: else -> break
    od;
    /* Every publication claimed, every lane retired. */
    (nclaimed == NPUB && host_bits == worker_bits);
    i = 1;
    do
    :: i <= NPUB -> assert(claimed[i] == 1); i++
    :: else -> break
    od
}

proctype Consumer(byte me) {
    byte h, w, mine = 0, pend, l;
    bool retired;
    l = me;
    do
    :: l < NLANES -> mine = mine | (1 << l); l = l + NCONS
    :: else -> break
    od;
end_idle:
    do
    :: ((host_bits ^ worker_bits) & mine) != 0 ->   /* a poll that finds work */
        h = host_bits;        /* acquire */
        /* acquire; the claim makes this consumer the owner of the lanes */
        atomic {
            w = worker_bits;
            pend = (h ^ w) & mine;
            h = 0; w = 0;
            l = 0;
            do
            :: l < NLANES -> if :: (pend >> l) & 1 -> reading[l] = 1 :: else fi; l++
            :: else -> break
            od
        }
        retired = 0;
#ifdef BUG_RETIRE_FIRST
        if
        :: skip
        :: worker_bits = worker_bits ^ pend;  /* retire reordered first */
           retired = 1
        fi;
#endif
        l = 0;
        do
        :: l < NLANES ->
            if
            :: (pend >> l) & 1 ->
                /* visit: copy the slot out */
                atomic {
                    assert(retired || in_flight(l));
                    assert(slot[l] != 0 && claimed[slot[l]] == 0);
                    claimed[slot[l]]++;
                    nclaimed++
                }
            :: else
            fi;
            l++
        :: else -> break
        od;
        /* One retire per claim (release xor), after the reads. */
        atomic {
            if
            :: !retired ->
                assert(((host_bits ^ worker_bits) & pend) == pend);
                worker_bits = worker_bits ^ pend
            :: else
            fi;
            l = 0;
            do
            :: l < NLANES -> if :: (pend >> l) & 1 -> reading[l] = 0 :: else fi; l++
            :: else -> break
            od
        }
    od
}

init {
    byte i = 0;
    atomic {
        do
        :: i < NCONS -> run Consumer(i); i++
        :: else -> break
        od
    }
}
