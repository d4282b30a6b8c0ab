#!/usr/bin/env python3
"""knit timeline: read the Chrome Trace Event JSON a knit pool wrote.

    timeline.py TRACE.json [--png OUT.png] [--size WxH] [--top N]
    timeline.py TRACE.json --check        # validate; print counts as JSON
    timeline.py TRACE.json --counts       # validate; counts as tab-separated
                                          # lines (for tests/timeline_test)

The summary gives, per thread, the share of the trace's time it spent
  busy     running a task (not on behalf of an await),
  helping  running a task while one of its own awaits waited,
  parked   asleep on its doorbell (a worker with nothing to do),
  waiting  inside an await or a full pipeline without running anything,
  idle     none of these (looking for work, or outside knit),
then steals, the longest tasks, and per pipeline the time its input was
blocked (pipeline full), the items in flight and the time per stage.
A thread's time is the time of its innermost span: a task that awaits and
runs another task counts as busy, then as helping for the inner task.

--check exits 1 with a message on the first malformed part: JSON that does
not parse, an event without the fields Perfetto needs (ph, ts, pid, tid;
dur for spans, s for instants, numeric args for counters), spans that do
not nest on one thread, a track with no thread_name, missing metadata.

--png draws a Gantt chart with gnuplot: one row per thread, one colour per
kind of span, nested spans drawn thinner over their parents.
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

KINDS = [  # (key, legend, colour)
    ("busy", "task", "#4e79a7"),
    ("helping", "task while awaiting", "#f28e2b"),
    ("parked", "parked", "#bab0ac"),
    ("waiting", "await", "#edc948"),
    ("stage", "pipeline stage", "#59a14f"),
    ("piece", "parallel_for piece", "#b07aa1"),
    ("stall", "pipeline full", "#e15759"),
]
COLOUR = {k: c for k, _, c in KINDS}


class BadTrace(Exception):
    pass


def ns(x):
    """Microseconds (a JSON number) to integer nanoseconds."""
    return int(round(float(x) * 1000))


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise BadTrace(f"{path}: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise BadTrace("the top level must be an object with a traceEvents list")
    return doc


def check_events(doc):
    """Validates every event; returns (spans by tid, instants, counters, names)."""
    other = doc.get("otherData")
    if not isinstance(other, dict):
        raise BadTrace("no otherData object")
    for key in ("knit_version", "sched", "threads", "capacity", "dropped"):
        if key not in other:
            raise BadTrace(f"otherData has no {key}")
    spans = collections.defaultdict(list)  # tid -> [(t0, t1, event)]
    instants = collections.defaultdict(list)
    counters = []
    names = {}
    for i, e in enumerate(doc["traceEvents"]):
        where = f"event {i}"
        if not isinstance(e, dict):
            raise BadTrace(f"{where} is not an object")
        ph = e.get("ph")
        if ph not in ("X", "i", "C", "M"):
            raise BadTrace(f"{where}: ph {ph!r} is not one of X, i, C, M")
        for key in ("pid", "tid"):
            if not isinstance(e.get(key), int):
                raise BadTrace(f"{where}: {key} missing or not an integer")
        if not isinstance(e.get("name"), str):
            raise BadTrace(f"{where}: name missing")
        if not is_num(e.get("ts")) or e["ts"] < 0:
            raise BadTrace(f"{where}: ts missing or negative")
        tid = e["tid"]
        if ph == "M":
            if not isinstance(e.get("args"), dict):
                raise BadTrace(f"{where}: metadata without args")
            if e["name"] == "thread_name":
                names[tid] = e["args"].get("name")
            continue
        if ph == "X":
            if not is_num(e.get("dur")) or e["dur"] < 0:
                raise BadTrace(f"{where}: span without a dur >= 0")
            t0 = ns(e["ts"])
            spans[tid].append((t0, t0 + ns(e["dur"]), e))
        elif ph == "i":
            if e.get("s") not in ("t", "p", "g"):
                raise BadTrace(f"{where}: instant without s (t, p or g)")
            instants[tid].append(e)
        else:
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(
                    is_num(v) for v in args.values()):
                raise BadTrace(f"{where}: counter without numeric args")
            counters.append(e)
    for tid in list(spans) + list(instants):
        if not isinstance(names.get(tid), str):
            raise BadTrace(f"tid {tid} has events but no thread_name")
    return spans, instants, counters, names


def nest(spans):
    """Sorts each thread's spans into trees. Raises BadTrace on overlap.
    Returns tid -> list of (t0, t1, event, depth, parent_index)."""
    out = {}
    for tid, lst in spans.items():
        lst = sorted(lst, key=lambda s: (s[0], -s[1]))
        stack = []  # indexes into res
        res = []
        for t0, t1, e in lst:
            while stack and res[stack[-1]][1] <= t0:
                stack.pop()
            if stack and t1 > res[stack[-1]][1]:
                p = res[stack[-1]]
                raise BadTrace(
                    f"tid {tid}: span {e['name']!r} at {t0} ns ends at {t1}, "
                    f"after its enclosing {p[2]['name']!r} ends at {p[1]} ns")
            res.append((t0, t1, e, len(stack), stack[-1] if stack else -1))
            stack.append(len(res) - 1)
        out[tid] = res
    return out


def span_class(e, ancestors):
    """What a span's own (exclusive) time counts as."""
    cat = e.get("cat")
    if cat in ("task", "frame"):  # a frame: a stolen fork-join child
        return "helping" if e.get("args", {}).get("help") else "busy"
    if cat == "idle":
        return "parked"
    if cat in ("await", "stall"):
        return "waiting"
    # a stage or piece: the time of the task it runs in
    for a in reversed(ancestors):
        if a.get("cat") in ("task", "frame"):
            return span_class(a, [])
    return "busy"


def draw_class(e, ancestors):
    cat = e.get("cat")
    if cat == "stage":
        return "stage"
    if cat == "piece":
        return "piece"
    if cat == "stall":
        return "stall"
    return span_class(e, ancestors)


def analyse(doc):
    spans, instants, counters, names = check_events(doc)
    trees = nest(spans)
    return spans, instants, counters, names, trees


def counts(doc, labels=None, pieces=None):
    """--check output: per track, how many of each kind."""
    spans, instants, counters, names, trees = analyse(doc)
    tracks = {}
    for tid in sorted(set(names)):
        c = collections.Counter()
        for t0, t1, e, depth, parent in trees.get(tid, []):
            cat = e.get("cat", "")
            c[cat] += 1
            if cat == "task" and e.get("args", {}).get("help"):
                c["task_help"] += 1
            if cat == "task" and labels is not None:
                labels[(tid, e["name"])] += 1
            if cat == "piece" and pieces is not None:
                pieces.append(e["args"]["end"] - e["args"]["begin"])
        for e in instants.get(tid, []):
            c[e.get("cat", "")] += 1
            if e.get("cat") == "claim":
                c["lanes"] += e["args"]["lanes"]
        tracks[str(tid)] = {"name": names[tid], **c}
    return {"ok": True, "tracks": tracks, "counters": len(counters),
            "otherData": doc["otherData"]}


def fmt_ms(t):
    return f"{t / 1e6:9.3f} ms"


def summary(doc, path, top):
    spans, instants, counters, names, trees = analyse(doc)
    other = doc["otherData"]
    allspans = [s for lst in trees.values() for s in lst]
    if not allspans:
        print(f"{path}: no spans (dropped {other['dropped']})")
        return
    t_lo = min(s[0] for s in allspans)
    t_hi = max(s[1] for s in allspans)
    window = max(1, t_hi - t_lo)
    print(f"{path}: knit {other['knit_version']}, {other['sched']}, "
          f"{other['threads']} threads, {len(doc['traceEvents'])} events, "
          f"{other['dropped']} dropped, {window / 1e6:.3f} ms")
    if other["dropped"]:
        print("  (records were dropped: the oldest part of each full ring is "
              "missing; raise KNIT_TIMELINE_EVENTS)")
    print(f"\n{'thread':<28} {'busy':>7} {'helping':>8} {'parked':>7} "
          f"{'waiting':>8} {'idle':>7} {'tasks':>8} {'claims':>7} {'steals':>7}")
    for tid in sorted(names):
        tree = trees.get(tid, [])
        share = collections.Counter()
        child = [0] * len(tree)
        for t0, t1, e, depth, parent in tree:
            if parent >= 0:
                child[parent] += t1 - t0
        for idx, (t0, t1, e, depth, parent) in enumerate(tree):
            anc = []
            p = parent
            while p >= 0:
                anc.append(tree[p][2])
                p = tree[p][4]
            anc.reverse()
            share[span_class(e, anc)] += (t1 - t0) - child[idx]
        tasks = sum(1 for s in tree if s[2].get("cat") in ("task", "frame"))
        ins = instants.get(tid, [])
        claims = sum(1 for e in ins if e.get("cat") == "claim")
        steals = sum(1 for e in ins if e.get("cat") == "steal")
        idle = max(0, window - sum(share.values()))
        pct = lambda v: f"{100.0 * v / window:6.1f}%"
        print(f"{names[tid][:28]:<28} {pct(share['busy']):>7} {pct(share['helping']):>8} "
              f"{pct(share['parked']):>7} {pct(share['waiting']):>8} {pct(idle):>7} "
              f"{tasks:>8} {claims:>7} {steals:>7}")
    tasks = [(t1 - t0, t0, tid, e) for tid, lst in trees.items()
             for t0, t1, e, d, p in lst if e.get("cat") in ("task", "frame")]
    tasks.sort(key=lambda x: -x[0])
    if tasks:
        print(f"\nlongest tasks (of {len(tasks)}):")
        for dur, t0, tid, e in tasks[:top]:
            print(f"  {fmt_ms(dur)}  at {fmt_ms(t0 - t_lo)}  {names[tid][:24]:<24} {e['name']}")
    # pipelines
    pipes = collections.defaultdict(lambda: {"stall": 0, "stalls": 0,
                                            "stages": collections.defaultdict(list),
                                            "samples": []})
    for tid, lst in trees.items():
        for t0, t1, e, d, p in lst:
            a = e.get("args", {})
            if e.get("cat") == "stall":
                pipes[a["pipeline"]]["stall"] += t1 - t0
                pipes[a["pipeline"]]["stalls"] += 1
            elif e.get("cat") == "stage":
                pipes[a["pipeline"]]["stages"][a["stage"]].append(t1 - t0)
    for e in counters:
        name = e["name"]
        if name.startswith("pipeline ") and name.endswith(" in flight"):
            pid = int(name.split()[1])
            pipes[pid]["samples"].append((ns(e["ts"]), e["args"]["items"]))
    for pid in sorted(pipes):
        pp = pipes[pid]
        print(f"\npipeline {pid}: input blocked (pipeline full) {pp['stall'] / 1e6:.3f} ms "
              f"in {pp['stalls']} waits ({100.0 * pp['stall'] / window:.1f}% of the trace)")
        smp = sorted(pp["samples"])
        if len(smp) > 1:
            area = sum((smp[i + 1][0] - smp[i][0]) * smp[i][1] for i in range(len(smp) - 1))
            span = smp[-1][0] - smp[0][0]
            print(f"  items in flight: at most {max(v for _, v in smp)}, "
                  f"{area / span if span else 0:.2f} on average")
        for k in sorted(pp["stages"]):
            d = pp["stages"][k]
            print(f"  stage {k}: {len(d)} items, {sum(d) / 1e6:.3f} ms in all, "
                  f"{sum(d) / len(d) / 1e3:.1f} us each, longest {max(d) / 1e3:.1f} us")
    return trees, names, t_lo, window


def draw(doc, trees, names, t_lo, window, out, size, title):
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        raise BadTrace("gnuplot not found (./bazelw installs gnuplot-nox)")
    width, height = size
    tids = sorted(names)
    row = {tid: i for i, tid in enumerate(reversed(tids))}
    px = window / max(1, width)  # nanoseconds per pixel
    rows = []
    for tid in tids:
        tree = trees.get(tid, [])
        merged = {}  # (depth, class) -> [x0, x1]
        for t0, t1, e, depth, parent in sorted(tree, key=lambda s: s[0]):
            anc = []
            p = parent
            while p >= 0:
                anc.append(tree[p][2])
                p = tree[p][4]
            anc.reverse()
            key = (min(depth, 3), draw_class(e, anc))
            cur = merged.get(key)
            if cur is not None and t0 - cur[1] <= px:
                cur[1] = max(cur[1], t1)  # coalesce what one pixel cannot show
                continue
            if cur is not None:
                rows.append((row[tid], key, cur[0], cur[1]))
            merged[key] = [t0, t1]
        for key, cur in merged.items():
            rows.append((row[tid], key, cur[0], cur[1]))
    rows.sort(key=lambda r: r[1][0])  # parents first, children over them
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "spans.dat")
        with open(data, "w") as f:
            for y, (depth, cls), a, b in rows:
                h = 0.42 - 0.09 * depth
                rgb = int(COLOUR[cls][1:], 16)
                x0, x1 = (a - t_lo) / 1e6, max(b, a + px) / 1e6 - t_lo / 1e6
                f.write(f"{(x0 + x1) / 2:.6f} {y} {x0:.6f} {x1:.6f} {y - h:.3f} {y + h:.3f} {rgb}\n")
            if not rows:
                f.write("0 0 0 0 0 0 0\n")
        ytics = ", ".join('"%s" %d' % (names[t].replace('"', "'"), row[t]) for t in tids)
        keys = ", ".join(f"keyentry with boxes fs solid fc rgb '{c}' title '{lab}'"
                         for _, lab, c in KINDS)
        script = f"""
set terminal pngcairo size {width},{height} font ',9'
set output '{out}'
set title "{title.replace('"', "'")}" noenhanced
set xlabel 'ms'
set yrange [-0.6:{len(tids) - 0.4}]
set xrange [0:{window / 1e6:.6f}]
set ytics ({ytics}) noenhanced
set key outside bottom horizontal noenhanced
set grid xtics
set style fill solid 1.0 noborder
plot '{data}' using 1:2:3:4:5:6:7 with boxxy lc rgb variable notitle, {keys}
"""
        r = subprocess.run([gnuplot], input=script, text=True, capture_output=True)
        if r.returncode != 0 or not os.path.exists(out):
            raise BadTrace(f"gnuplot failed: {r.stderr.strip()}")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--png", help="draw a Gantt chart into this file")
    ap.add_argument("--size", default=None, help="WxH of the PNG (default 1400 x rows)")
    ap.add_argument("--top", type=int, default=10, help="longest tasks to list")
    ap.add_argument("--check", action="store_true", help="validate; print counts as JSON")
    ap.add_argument("--counts", action="store_true",
                    help="validate; print counts as tab-separated lines")
    a = ap.parse_args(argv)
    try:
        doc = load(a.trace)
        if a.check:
            print(json.dumps(counts(doc), sort_keys=True))
            return 0
        if a.counts:
            labels, pieces = collections.Counter(), []
            c = counts(doc, labels, pieces)
            for tid, t in c["tracks"].items():
                print(f"thread\t{tid}\t{t['name']}")
                for k, v in t.items():
                    if k != "name":
                        print(f"track\t{tid}\t{k}\t{v}")
            for (tid, name), n in sorted(labels.items()):
                print(f"label\t{tid}\t{name}\t{n}")
            print(f"pieces\t{len(pieces)}\t{sum(pieces)}")
            print(f"counters\t{c['counters']}")
            for k, v in c["otherData"].items():
                print(f"other\t{k}\t{v}")
            return 0
        res = summary(doc, a.trace, a.top)
        if a.png and res is not None:
            trees, names, t_lo, window = res
            if a.size:
                try:
                    w, h = (int(v) for v in a.size.lower().split("x"))
                except ValueError:
                    raise BadTrace(f"--size {a.size}: expected WxH, like 1400x400")
                if not (100 <= w <= 20000 and 100 <= h <= 20000):
                    raise BadTrace(f"--size {a.size}: each side must be 100..20000")
            else:
                w, h = 1400, max(300, 110 + 45 * len(names))
            other = doc["otherData"]
            title = (f"{os.path.basename(a.trace)}: knit {other['sched']}, "
                     f"{other['threads']} threads, {other['dropped']} dropped")
            draw(doc, trees, names, t_lo, window, a.png, (w, h), title)
            print(f"\nwrote {a.png} ({w}x{h})")
    except BadTrace as e:
        print(f"timeline: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
