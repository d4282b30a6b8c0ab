/* ticket.pml: the "ticket" claim discipline over the lane core.
 *
 * Mirrors
 *   proctype Producer  runtime/carpet.c:knit__carpet_publish (shadow, highest
 *                      free lane, slot, release store of host_bits) calling
 *                      sched/ticket.c:knit__ticket_publish (relaxed store of
 *                      order[tail & RING-1], private tail++), and
 *                      runtime/carpet.c:knit__carpet_flush calling
 *                      sched/ticket.c:knit__ticket_flush (one release store
 *                      of the tail per burst). Bursts end nondeterministically;
 *                      a full carpet (KNIT_EAGAIN) makes the caller flush and
 *                      retry, modelled as waiting for worker_bits to change.
 *   proctype Consumer  sched/ticket.c:knit__ticket_claim: acquire load of the
 *                      head, closed (-1) check, acquire load of the tail,
 *                      nothing available returns, a distance over the lane
 *                      count is a stale snapshot, batch = min(available,
 *                      BATCH), the lane ids read from the ring *before* the
 *                      CAS, one CAS of the head per batch, visits in ticket
 *                      order, a failing visit closes the head (-DCLOSE), one
 *                      knit_carpet_retire per claim on every path, at most
 *                      KNIT__TICKET_ATTEMPTS (2) tries per claim.
 *
 * The carpet has NLANES lanes and the ring NLANES cells (the code has 32 and
 * 32: the argument that cell head & 31 is not refilled while the head sits
 * still is the same). Tickets are small integers here (no 32-bit wrap).
 * NCONS consumers (spin -DNCONS=1..3), NPUB publications, BATCH lanes per
 * claim at most.
 *
 * Verified (safety run: assertions + invalid end states):
 *   - no lane claimed twice: a visited lane is in flight, its slot holds a
 *     task not claimed before, and it is exactly the task of that ticket
 *     (claims follow publication order through the ring);
 *   - the producer never writes a slot or ring cell still in use (slot: lane
 *     free and not being read; ring cell: its previous ticket was claimed,
 *     i.e. the head has passed it);
 *   - no published lane lost: the producer ends waiting until every task was
 *     claimed and retired (or, with -DCLOSE, the queue closed) and asserts
 *     each task claimed exactly once (at most once when closed);
 *   - no deadlock: all processes end at end labels; a closed queue ends the
 *     consumers (KNIT_ECLOSED) instead of hanging them.
 *
 * Seeded bug:
 *   -DBUG_TAIL_FIRST  the tail is stored (flushed) before the ring cell of
 *                     the ticket is written: a consumer reads a stale cell
 *                     and visits a lane that is not the ticket (not in
 *                     flight, or another task).
 */
#ifndef NCONS
#define NCONS 2
#endif
#ifndef NLANES
#define NLANES 2
#endif
#define RING NLANES
#ifndef NPUB
#define NPUB 4
#endif
#define BATCH 2   /* region_lanes; the claim below unrolls 2 */
#define ATTEMPTS 2
#define ALL ((1 << NLANES) - 1)
#define CLOSED (-1)

byte host_bits;            /* producer only */
byte worker_bits;          /* consumers only (atomic xor) */
byte slot[NLANES];         /* task id in the slot of each lane; 0 = none */
short head;                /* consumers CAS it forward; -1 = closed */
byte tail;                 /* the published ticket count (release store) */
byte order[RING];          /* order[t % RING] = lane of ticket t */
bool reading[NLANES];      /* ghost: a consumer owns the lane */
byte claimed[NPUB + 1];    /* ghost: times task t was visited */
byte nclaimed;             /* ghost */

#define in_flight(l) (((host_bits ^ worker_bits) >> (l)) & 1)

active proctype Producer() {
    byte host_local = 0, shadow = 0, freel, lane, npub = 0, ptail = 0,
         published = 0, i;
    do
    :: npub < NPUB ->
retry:
        freel = ~(host_local ^ shadow) & ALL;
        if
        :: freel == 0 ->
            shadow = worker_bits;            /* reload, acquire */
            freel = ~(host_local ^ shadow) & ALL;
            if
            :: freel == 0 ->
                /* KNIT_EAGAIN: end the burst, then retry. */
                atomic {
                    if
                    :: published != ptail -> published = ptail; tail = ptail
                    :: else
                    fi
                }
                (worker_bits != shadow || head < 0);
                if
                :: head < 0 -> break            /* closed: owner reports */
                :: else -> goto retry
                fi
            :: else
            fi
        :: else
        fi;
        lane = NLANES - 1;
        do
        :: ((freel >> lane) & 1) -> break
        :: else -> lane--
        od;
#ifdef BUG_TAIL_FIRST
        atomic {                             /* plain stores of the slot */
            assert(!in_flight(lane) && !reading[lane]);
            slot[lane] = npub + 1
        }
        published = ptail + 1;
        tail = ptail + 1;                    /* flushed before the cell */
        order[ptail % RING] = lane;          /* knit__ticket_publish */
        ptail++;
        host_local = host_local ^ (1 << lane);
        host_bits = host_local;
#else
        /* Slot (plain stores), ring cell (relaxed) and host_bits (release)
         * in one step: consumers read none of them before the tail store
         * of the flush below, which orders all three (release). */
        atomic {
            assert(!in_flight(lane) && !reading[lane]);
            slot[lane] = npub + 1;
            /* The ring cell is free: its previous ticket was claimed. */
            assert(ptail < RING || head < 0 || head > ptail - RING);
            order[ptail % RING] = lane;
            ptail++;
            host_local = host_local ^ (1 << lane);
            host_bits = host_local
        }
#endif
        npub++;
        if
        :: atomic {                          /* flush: end the burst */
               if
               :: published != ptail -> published = ptail; tail = ptail
               :: else
               fi
           }
        :: npub < NPUB                       /* or keep the burst open */
        fi
    :: else -> break
    od;
    atomic {
        if
        :: published != ptail -> published = ptail; tail = ptail
        :: else
        fi
    }
    (head < 0 || (nclaimed == NPUB && host_bits == worker_bits));
    i = 1;
    do
    :: i <= NPUB ->
        assert(claimed[i] == 1 || (head < 0 && claimed[i] == 0));
        i++
    :: else -> break
    od
}

/* Visits lane l as the k-th ticket of the batch at head h. */
inline visit(l, k) {
    assert(in_flight(l));
    assert(!reading[l]);
    assert(slot[l] == h + k + 1 && claimed[slot[l]] == 0);
    claimed[slot[l]]++;
    nclaimed++;
    reading[l] = 1;
    done = done | (1 << l)
}

proctype Consumer(byte me) {
    short h;                 /* the head snapshot */
    byte b, l0, l1, done;    /* batch size, its lane ids, lanes to retire */
    bit attempt, fail;
end_idle:
    do
    :: (head != tail) ->                     /* a poll that may find work */
        attempt = 0;
try:
        h = head;                            /* acquire */
        if
        :: h < 0 -> goto closed              /* KNIT_ECLOSED */
        :: else
        fi;
        atomic {                             /* acquire load of the tail */
            b = tail - h;
            if
            :: b == 0 -> h = 0; goto again   /* nothing: two loads, no write */
            :: b > NLANES -> b = 0; h = 0; goto retry   /* stale head */
            :: else -> b = (b < BATCH -> b : BATCH)
            fi
        }
        /* The lane ids of the batch, read before the CAS (relaxed). */
        l0 = order[h % RING];
        if
        :: b > 1 -> l1 = order[(h + 1) % RING]
        :: else
        fi;
        atomic {                             /* CAS head: h -> h + b */
            if
            :: head == h -> head = h + b
            :: else -> b = 0; h = 0; l0 = 0; l1 = 0; goto retry
            fi
        }
        /* The visits, in ticket order, in one step: nobody else touches
         * these lanes or slots until the retire. */
        atomic {
            done = 0;
            fail = 0;
            visit(l0, 0);
#ifdef CLOSE
            if
            :: fail = 1                      /* the visit failed */
            :: skip
            fi;
#endif
            if
            :: b > 1 && !fail -> visit(l1, 1)
            :: else
            fi;
#ifdef CLOSE
            if
            :: b > 1 && !fail -> if :: fail = 1 :: skip fi
            :: else
            fi;
#endif
            b = 0; h = 0; l0 = 0; l1 = 0
        }
        if
        :: fail -> head = CLOSED             /* release store */
        :: else
        fi;
        atomic {                             /* one retire per claim */
            worker_bits = worker_bits ^ done;
            reading[0] = reading[0] & !(done & 1);
            reading[NLANES - 1] = reading[NLANES - 1] & !((done >> (NLANES - 1)) & 1);
#if NLANES > 2
            reading[1] = reading[1] & !((done >> 1) & 1);
#endif
            done = 0
        }
        if
        :: fail -> goto closed
        :: else -> goto again
        fi;
retry:
        if
        :: attempt == 0 -> attempt = 1; goto try
        :: else
        fi;
again:
        attempt = 0
    :: head < 0 -> break
    od;
closed:
    skip
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
