/* fork_deque.pml: the split fork deque of knit_fork / knit_join (frames),
 * one owner against NTHIEF thieves (issue 12, "Proofs and tests").
 *
 * Mirrors (line numbers: runtime/frame.c at 4d4afcb, "lean join fast
 * path; share-time init of state")
 *   proctype Owner   one consumer id running a bounded, nondeterministic
 *                    LIFO sequence of NF forks and joins (any interleaving
 *                    of fork and join-the-newest), including joins while
 *                    thieves are active and forks made while a join waits
 *                    for a thief (knit__frame_wait, 228-232, helps through
 *                    knit__pool_run_some; a task it runs forks on the SAME
 *                    deque: runtime/task.c:62, and pool.c:265 ->
 *                    frame.c:356 for a stolen frame it runs, both use
 *                    p->fdqs[tls->consumer]).
 *     fork           knit_fork 160-188: a full deque (h == CAP, 170-175)
 *                    runs the child at the fork (idx INLINE); else idx = h,
 *                    cells[h] = f, head = h + 1 (176-181, owner-private,
 *                    one step). The state word is NOT written at the fork
 *                    (since 4d4afcb): the model gives it a stale value
 *                    (DONE, as left by an earlier stolen use of the same
 *                    knit_frame). Then the rare path knit__fork_slow
 *                    123-140: share when h == 0 (124), when movesplit is
 *                    set (125-128, load and clear in one step), or
 *                    nondeterministically (an over-approximation: the
 *                    code no longer polls, it shares only at h == 0 and
 *                    on movesplit; sharing at any fork covers both;
 *                    -DNOPOLL leaves it out).
 *     share          knit__fdq_share 98-119: ns = split + (head-split+1)/2
 *                    (101); state = QUEUED for the frames in [split, ns)
 *                    (102-107, one step; asserted: none of them taken);
 *                    load ts (108); CAS loop {t, s} -> {t, ns} (113-116,
 *                    one atomic step per try, a failed try reloads v);
 *                    q->split = ns (117). The notify (118) belongs to the
 *                    parking protocol (doorbell.pml), not modelled.
 *     join           knit_join 309-329 (fast path 318-325: h >= split) and
 *                    knit__join_slow 258-307: INLINE frame (266); the LIFO
 *                    check (272-278) as an assertion; pop head = h (279);
 *                    private if h >= split (280-283, same as the fast
 *                    path): the child runs here; else: assert split ==
 *                    h + 1; load ts (285); loop (286-299): t > h -> stolen
 *                    (288); ns (289); CAS {t, h+1} -> {t, ns} (292),
 *                    success -> split = ns, run here (295-297), failure
 *                    reloads v and loops; stolen: the relaxed reset
 *                    ts = {h, h} (303), split = h (304), then
 *                    knit__frame_wait (305).
 *     wait           knit__frame_wait 218-254: the acquire load of DONE
 *                    (226) is the guard of the "finish" step; helping
 *                    (228-232) is the owner forking while the top frame
 *                    waits; the CAS STOLEN -> bell (246-249), never from
 *                    QUEUED (251-252), then knit__pool_park (pool.c:289):
 *                    arm (rung = 0), re-check DONE (knit__frame_done,
 *                    211-215), sleep until rung. Parking WITHOUT the 1 ms
 *                    timeout of the C call (so a lost ring would show as a
 *                    deadlock). -DNOBELL leaves parking out.
 *   proctype Thief   knit__fdq_take 331-351 then knit__frame_run_stolen
 *                    353-382: load ts (332); t >= s: set movesplit if
 *                    clear (334-339; one step, then the thief idles until
 *                    ts shows work: polling an unchanged word is a
 *                    stutter); CAS {t, s} -> {t+1, s} (342-345, one atomic
 *                    step); read cells[t] (346); state = STOLEN (349); the
 *                    child runs (368); exchange state -> DONE, ring the
 *                    bell if the old value was the bell (379-381).
 *
 * ts is the pair (tail, split) in two bytes, but every access to it is one
 * atomic step on both (a load, a CAS comparing both, or a store of both),
 * exactly like the 64-bit word. head and the owner copy of split (osplit)
 * are Owner locals. Frames have distinct ids 1..NF (the C code reuses
 * stack frames; distinct ids make every reuse visible to the ghosts).
 *
 * Memory model. Promela interleaves, i.e. it is sequentially consistent.
 * That is adequate here because every cross-thread decision is made on
 * ONE word: ts (thieves only by CAS; the owner by CAS, or by the reset
 * store when tail == split, where no thief CAS can succeed) or a frame
 * state word (thief store STOLEN, exchange DONE; owner acquire load and
 * CAS STOLEN -> bell). Per location, coherence plus RMW atomicity (a CAS
 * reads the last value in modification order) give exactly the total
 * order the interleaving assumes. The other data (cells, frame fields,
 * the result, and the state QUEUED written at share time, 102-107) are
 * plain or relaxed and are ordered by release/acquire on those words: every ts value with tail < split that a thief CAS can read
 * from was written by an owner release RMW (share: seq_cst; shrink:
 * acq_rel) or by a thief RMW continuing its release sequence (the relaxed
 * reset writes tail == split, which no thief CAS matches, so it never sits
 * inside a sequence a thief reads from); the result is released by the
 * exchange to DONE and acquired by the owner load (226) or the failed
 * CAS (248). The one place where SC would hide a real weak-memory bug is
 * a StoreLoad across two words, which the C code avoids (the shrink is a
 * CAS on the word the thieves CAS); BUG=1 makes that reorder explicit.
 * Also abstracted: the child body (one ghost step; its own forks go to
 * the thief deque, or, run at the join, are indistinguishable from forks
 * after the join), failures and messages (data carried by DONE), the poll
 * counter (nondeterminism), knit__pool_notify and the parking bits
 * (doorbell.pml), the doorbell as one flag (arm clears it).
 *
 * Parameters: -DNF=3 forks in all, -DCAP=NF slots (KNIT_FORK_DEPTH),
 * -DNTHIEF=2 thieves (or -DNCONS=n, as check_models.sh passes it).
 *
 * Variants of the protocol (-DFIX):
 *   FIX=0 (default) runtime/frame.c as written: the stolen path resets
 *        ts = {h, h} and sets head = h BEFORE it waits, so work helped
 *        during the wait forks into slot h. A thief whose CAS took slot h
 *        but has not yet read cells[h] (346) then reads the new frame:
 *        THIS FAILS (see the report; "cell overwritten before the thief
 *        read it"; with -DNO_CELL_ASSERT: that frame is run twice and
 *        the stolen one never).
 *   FIX=1 pre-leap (Lace lace_leapfrog, design note section 3): while it
 *        waits the owner keeps head = h + 1 and ts = {h+1, h+1}; after
 *        DONE it stores ts = {h, h} (tail == split == h + 1 asserted),
 *        split = h, head = h. Passes.
 *   FIX=2 the wait helps (forks) only once the state is no longer QUEUED
 *        (the thief marks STOLEN (349) after its cell read (346); in C
 *        this needs the STOLEN store release and the loads of the state
 *        in the wait acquire, and a wait that does not help meanwhile).
 *        Passes.
 *   -DNOHELP: no forks while waiting; FIX=0 then passes (shows that the
 *        failure needs helping).
 *
 * Verified (safety run: assertions + invalid end states):
 *   - exactly once: each forked child runs once (ghost runs[]), by the
 *     owner (inline at the fork, at a private join, after a winning
 *     shrink CAS) or by the one thief whose CAS took it (ghost taker[]);
 *     never both, never zero (final check of the owner);
 *   - a thief CAS takes only a live, queued, untaken frame forked at that
 *     slot; the cell the thief then reads still holds that frame;
 *   - a join of a stolen frame returns only after DONE, with runs == 1;
 *   - the reset ts = {h, h} happens only when tail == split (asserted);
 *   - the LIFO check of the join holds (h + 1 == head, cells[h] == f),
 *     split == h + 1 on the slow path, tail <= split <= head after each
 *     owner step;
 *   - no deadlock, no lost ring: the owner finishes all joins; thieves end
 *     idle at their end label.
 *
 * Seeded bugs (-DBUG=n, with FIX=1, FIX=2 or NOHELP, which pass alone):
 *   BUG=1 the shrink as a plain store of split, then a re-read of tail
 *         (Lace lace_shrink_shared without its seq_cst fence): the store
 *         may become visible after the load (made explicit as a
 *         nondeterministic order); a thief takes the frame the owner
 *         also runs: run twice.
 *   BUG=2 the reset ts = {h, h} without tail == split: when the join
 *         finds only its own frame shared (t == h), it stores ts = {h, h}
 *         instead of the CAS {h, h+1} -> {h, h} (a tempting shortcut:
 *         "nothing else is shared, just reset"): the reset assertion fails
 *         (tail != split); with -DNO_RESET_ASSERT the consequence shows:
 *         a thief CAS between the load (285) and the store takes the child
 *         the owner then also runs (and the store moves tail back);
 *         spin reports that double run (taker/runs assertion in
 *         owner_run) first, its depth-first search tries thieves first.
 *   BUG=3 the thief reads cells[t] before its CAS: after an ABA on ts
 *         (slot t reused by a later fork) it runs the old frame again.
 * (Comments here avoid apostrophes: spin runs the C preprocessor.)
 */
#ifndef NF
#define NF 3
#endif
#ifndef CAP
#define CAP NF
#endif
#ifndef NTHIEF
#ifdef NCONS
#define NTHIEF NCONS    /* check_models.sh passes -DNCONS */
#else
#define NTHIEF 2
#endif
#endif
#ifndef BUG
#define BUG 0
#endif
#ifndef FIX
#define FIX 1           /* runtime/frame.c now waits pre-leap */
#endif

#define QUEUED 0
#define STOLEN 1
#define DONE 2
#define BELL 3          /* the address of the owner doorbell */
#define INLINE 255      /* KNIT__FR_INLINE */
#define OWNER 9         /* taker[] value: the owner ran it */

byte tail, split;       /* ts: one word (see above) */
bool movesplit;
byte cells[CAP];        /* frame id per slot, 0 = never written */
byte fstate[NF + 1];    /* frame state word */
bool rung;              /* the owner doorbell */
bool waiting[NF + 1];   /* owner-private: its join is in knit__frame_wait */
/* ghosts */
byte runs[NF + 1];      /* times the child of frame i ran */
byte taker[NF + 1];     /* 0, thief number 1..NTHIEF, or OWNER */
byte fslot[NF + 1];     /* slot of frame i, or INLINE */
bool live[NF + 1];      /* forked, its join has not returned */

/* A fork while the newest frame waits is work helped during the wait. */
#define WAITS (sp > 0 && waiting[stk[sp - 1]])
#if defined(NOHELP)
#define MAY_FORK (!WAITS)
#elif FIX == 2
#define MAY_FORK (!WAITS || fstate[stk[sp - 1]] != QUEUED)
#else
#define MAY_FORK true
#endif

/* The owner runs the child of frame id itself. */
inline owner_run(id) {
    d_step {
        assert(taker[id] == 0 && runs[id] == 0);
        taker[id] = OWNER;
        runs[id]++
    }
}

/* Owner store of ts = {x, x}: only when no thief CAS can succeed. */
inline reset(x) {
    atomic {
#ifndef NO_RESET_ASSERT
        assert(tail == split);
#endif
        tail = x; split = x
    }
}

active proctype Owner() {
    byte head = 0, osplit = 0, nforks = 0, sp = 0, id, h, t, s, ns, i;
    byte stk[NF];
    bool ok, share;
    do
    /* fork (also while the newest frame waits for its thief: helping) */
    :: nforks < NF && MAY_FORK ->
        nforks++; id = nforks;
        if
        :: head == CAP ->                       /* 170-175: run at the fork */
            d_step {
                fslot[id] = INLINE; live[id] = 1;
                stk[sp] = id; sp++
            };
            owner_run(id)
        :: else ->
            d_step {                            /* 176-181 */
                h = head;
                fslot[id] = h; cells[h] = id;
                fstate[id] = DONE;              /* stale: not written */
                live[id] = 1; head = h + 1;
                stk[sp] = id; sp++;
                share = (h == 0)                /* 182, 124 */
            };
            atomic {                            /* 183, 125-128 */
                if
                :: movesplit -> movesplit = 0; share = 1
                :: else
                fi
            };
#ifndef NOPOLL
            if                                  /* 129-138: the poll */
            :: !share -> share = 1
            :: true
            fi;
#endif
            if
            :: share && osplit < head ->        /* knit__fdq_share */
                ns = osplit + (head - osplit + 1) / 2;      /* 101 */
                d_step {                                    /* 102-107 */
                    i = osplit;
                    do
                    :: i < ns ->
                        assert(cells[i] != 0 && live[cells[i]] &&
                               taker[cells[i]] == 0 && !waiting[cells[i]]);
                        fstate[cells[i]] = QUEUED;
                        i++
                    :: else -> break
                    od;
                    i = 0
                };
                atomic { t = tail; s = split };             /* 108 */
                do                                          /* 113-116 */
                :: atomic {
                       if
                       :: tail == t && split == s -> split = ns; ok = 1
                       :: else -> t = tail; s = split; ok = 0
                       fi
                   };
                   if
                   :: ok -> break
                   :: else
                   fi
                od;
                osplit = ns                                 /* 117 */
            :: else
            fi;
            d_step { ok = 0; share = 0; t = 0; s = 0; ns = 0; h = 0 }
        fi;
        assert(tail <= split && split == osplit && osplit <= head)

    /* join the newest frame */
    :: sp > 0 && !waiting[stk[sp - 1]] ->
        id = stk[sp - 1];
        if
        :: fslot[id] == INLINE ->                           /* 266 */
            d_step { assert(runs[id] == 1); live[id] = 0; sp-- }
        :: else ->
            h = fslot[id];
            assert(h + 1 == head && cells[h] == id);       /* 272-278 */
            head = h;                                       /* 279 */
            if
            :: h >= osplit ->                               /* 280-283, 318-325 */
                owner_run(id);
                d_step { live[id] = 0; sp-- }
            :: else ->
                assert(osplit == h + 1);
                atomic { t = tail; s = split };             /* 285 */
                do                                          /* 286-299 */
                :: t > h -> break                           /* 288 */
                :: else ->
                    if                                      /* 289 */
                    :: t < h -> ns = (t + h + 1) / 2
                    :: else -> ns = h
                    fi;
#if BUG == 2
                    if
                    :: t == h ->
                        /* only our frame looked shared: a plain reset
                         * ts = {h, h} instead of the CAS */
                        reset(h);
                        osplit = h;
                        owner_run(id);
                        d_step { live[id] = 0; sp-- };
                        goto joined
                    :: else
                    fi;
#endif
#if BUG == 1
                    /* Plain store of split, then a re-read of tail, no
                     * StoreLoad: either order may become visible. */
                    if
                    :: atomic { split = ns }; t = tail
                    :: t = tail; atomic { split = ns }
                    fi;
                    if
                    :: t > h ->
                        /* tail == old split: all stolen (tail > split
                         * now, no thief CAS can succeed): put split
                         * back, then as the stolen path below */
                        atomic { assert(tail == h + 1 && tail >= split); split = h + 1 };
                        goto stolen
                    :: else ->
                        if
                        :: t > ns ->                        /* adjust */
                            ns = (t + h + 1) / 2;
                            atomic { split = ns }
                        :: else
                        fi;
                        osplit = ns;
                        owner_run(id);
                        d_step { live[id] = 0; sp-- };
                        goto joined
                    fi
#else
                    atomic {                                /* 292 */
                        if
                        :: tail == t && split == s -> split = ns; ok = 1
                        :: else -> t = tail; s = split; ok = 0
                        fi
                    };
                    if
                    :: ok ->                                /* 295-297 */
                        osplit = ns;
                        owner_run(id);
                        d_step { live[id] = 0; sp-- };
                        goto joined
                    :: else
                    fi
#endif
                od;
stolen:         /* tail == split == h + 1 */
#if FIX == 1
                head = h + 1;           /* pre-leap: keep the slot */
#else
                reset(h);                                   /* 303 */
                osplit = h;                                 /* 304 */
#endif
                waiting[id] = 1                             /* 305 */
            fi
        fi;
joined: skip;
        d_step { ok = 0; t = 0; s = 0; ns = 0; h = 0 };
        assert(tail <= split && split == osplit && osplit <= head)

    /* the wait ends: DONE seen by the acquire load (226) */
    :: sp > 0 && waiting[stk[sp - 1]] && fstate[stk[sp - 1]] == DONE ->
        id = stk[sp - 1];
#if FIX == 1
        h = fslot[id];
        assert(head == h + 1 && osplit == h + 1);
        atomic { assert(tail == h + 1); reset(h) };
        osplit = h; head = h;
        h = 0;
#endif
        d_step {
            assert(runs[id] == 1 && taker[id] != 0 && taker[id] != OWNER);
            waiting[id] = 0; live[id] = 0; sp--
        }

#ifndef NOBELL
    /* park on the doorbell (246-250, pool.c:289) */
    :: sp > 0 && waiting[stk[sp - 1]] && fstate[stk[sp - 1]] != DONE ->
        id = stk[sp - 1];
        atomic {                                            /* 246-249 */
            if
            :: fstate[id] == STOLEN -> fstate[id] = BELL; ok = 1
            :: fstate[id] == BELL -> ok = 1
            :: else -> ok = 0               /* QUEUED: yield; DONE */
            fi
        };
        if
        :: ok ->
            rung = 0;                                       /* arm */
            if
            :: fstate[id] == DONE                           /* re-check */
            :: else -> rung                                 /* sleep */
            fi
        :: else
        fi;
        ok = 0
#endif

    :: nforks == NF && sp == 0 -> break
    od;
    /* every child ran exactly once, every join returned */
    i = 1;
    do
    :: i <= NF -> assert(runs[i] == 1 && !live[i] && taker[i] != 0); i++
    :: else -> break
    od
}

proctype Thief(byte me) {
    byte t, s, id, claimed, old;
end_idle:
    do
    :: atomic { tail >= split && !movesplit -> movesplit = 1 }   /* 334-339 */
    :: atomic { tail < split -> t = tail; s = split };          /* 332 */
#if BUG == 3
        id = cells[t];                  /* read before the CAS */
#endif
        atomic {                                                /* 342 */
            if
            :: tail == t && split == s ->
                tail = t + 1;
                claimed = cells[t];
                assert(claimed != 0 && live[claimed] && fslot[claimed] == t &&
                       taker[claimed] == 0 && runs[claimed] == 0 &&
                       fstate[claimed] == QUEUED && !waiting[claimed]);
                taker[claimed] = me
            :: else -> claimed = 0
            fi
        };
        if
        :: claimed != 0 ->
#if BUG != 3
            id = cells[t];                                      /* 346 */
#endif
            /* the cell still holds the frame this CAS took */
#ifndef NO_CELL_ASSERT
            assert(id == claimed);
#endif
            fstate[id] = STOLEN;                                /* 349 */
            d_step { assert(runs[id] == 0 && live[id]); runs[id]++ }; /* 368 */
            atomic {                                            /* 379-381 */
                old = fstate[id];
                fstate[id] = DONE;
                if
                :: old == BELL -> rung = 1
                :: else
                fi
            }
        :: else
        fi;
        d_step { t = 0; s = 0; id = 0; claimed = 0; old = 0 }
    od
}

init {
    byte i = 1;
    atomic {
        do
        :: i <= NTHIEF -> run Thief(i); i++
        :: else -> break
        od
    }
}
