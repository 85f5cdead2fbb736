#!/usr/bin/env python3
"""Which bytes of the per-connection state a segment touches, measured (issue 17 item 2).

Reads pairs of DHAT profiles (valgrind --tool=dhat) of the same workload run for K1 and K2
units (exchanges or data segments) and subtracts, byte by byte, DHAT's access counts of the
heap blocks that hold one connection's state: the TCB (`Box<tcp::Connection>`), its counters
box and the stack's socket slots (`Vec<stack::sockets::Slot>`). Setup, handshake and close
cancel in the difference; what remains, divided by the units between the runs, is how often
each byte is read or written per unit in the steady loop. Offsets are mapped to fields with
the layouts gdb reads from the binary's debug information (`ptype /o`).

Output per block: bytes touched per unit (count >= PER_UNIT per unit), per ACK only (bulk),
the distinct 64-byte lines they fall in (from the block's start: the TCB and the slots are
64-byte aligned, the counters box only 16), and byte-accesses per unit (DHAT counts each
byte an access covers: an 8-byte load adds 8). Per field: [U rate] touched per unit, [A rate]
per ACK, [o rate] occasionally, rate = the field's most-accessed byte's count per unit (per
ACK for A).

Called by scripts/bench-hot-bytes.sh; usage:
  hot-bytes.py BINARY LABEL:SMALL.json:LARGE.json:UNITS[:SECONDARY_UNITS] ...
UNITS is the primary unit count between the two runs (exchanges, or data segments),
SECONDARY_UNITS (bulk only) the ACKs between them.
"""

import json
import re
import subprocess
import sys

LINE = 64
# A byte is "per unit" when touched at least this often per unit (a field read once per
# segment has 1.0; a byte touched every other segment 0.5).
PER_UNIT = 0.5
# Below PER_UNIT but above this: touched in the steady loop, not on every unit (timers
# firing, window updates, ACK-only work seen per data segment).
OCCASIONAL = 0.002

ROW = re.compile(r"^/\*\s+(\d+)(?::\s*\d+)?\s+\|\s+(\d+)\s+\*/\s+(\w+):\s+(.+?),?$")
TOTAL = re.compile(r"total size \(bytes\):\s+(\d+)")


def gdb_layouts(binary, types):
    """`ptype /o` of each type (and, recursively, of its struct fields): {type: (size, [(name, off, size, type)])}."""
    out = {}
    todo = list(types)
    while todo:
        batch = [t for t in dict.fromkeys(todo) if t not in out]
        todo = []
        if not batch:
            break
        args = ["gdb", "-batch", "-nx"]
        for t in batch:
            args += ["-ex", "echo @@TYPE " + t + "\\n", "-ex", "ptype /o " + t]
        args.append(binary)
        text = subprocess.run(args, capture_output=True, text=True, timeout=600).stdout
        for chunk in text.split("@@TYPE ")[1:]:
            name, _, body = chunk.partition("\n")
            fields, size = [], None
            depth = 0
            for line in body.splitlines():
                if "type = struct" in line:
                    depth += 1
                    continue
                m = TOTAL.search(line)
                if m and depth == 1:
                    size = int(m.group(1))
                    break
                m = ROW.match(line.strip())
                if m and depth == 1:
                    fields.append((m.group(3), int(m.group(1)), int(m.group(2)), m.group(4)))
            out[name] = (size, fields)
            for _, _, _, ty in fields:
                inner = option_inner(ty)
                for t in (ty, inner):
                    if t and "::" in t and t not in out:
                        todo.append(t)
    return out


def option_inner(ty):
    m = re.match(r"^core::option::Option<(.+)>$", ty)
    if m and not m.group(1).startswith("alloc::boxed::Box"):
        return m.group(1)
    return None


# Enums read as the variant a connection's slot holds: `Option<Socket>` → `Socket::Tcp` →
# `TcpState::Conn` → `ConnSock`, each variant at offset 0 (gdb's `ptype /o` of the enums says
# so) and all of the same size (checked before use), so `ConnSock` starts where the option does.
VIEW = {"core::option::Option<stack::sockets::Socket>": "stack::tcp_sockets::ConnSock"}


def leaves(layouts, ty, base, prefix, out):
    """Flattens `ty` into (path, offset, size) leaves."""
    size, fields = layouts.get(ty, (None, []))
    if not fields:
        return False
    for name, off, fsize, fty in fields:
        path = prefix + name
        view = VIEW.get(fty)
        if view and layouts.get(view, (None, []))[0] == fsize:
            leaves(layouts, view, base + off, path + ".conn.", out)
            continue
        inner = option_inner(fty)
        if inner and layouts.get(inner, (None, []))[1]:
            isize = layouts[inner][0]
            # Option<T> without a niche: the tag first, T at the end (rustc's layout here).
            start = base + off + (fsize - isize)
            if fsize > isize:
                out.append((path + ".<tag>", base + off, fsize - isize))
            leaves(layouts, inner, start, path + ".", out)
        elif not leaves(layouts, fty, base + off, path + ".", out):
            out.append((path, base + off, fsize))
    return True


def unrle(acc):
    out, i = [], 0
    while i < len(acc):
        if acc[i] < 0:
            out += [acc[i + 1]] * (-acc[i])
            i += 2
        else:
            out.append(acc[i])
            i += 1
    return out


def blocks(path, sizes):
    """The blocks of interest in one DHAT profile: {(kind, side): counts per byte}."""
    d = json.load(open(path))
    ftbl = d["ftbl"]
    found = {}
    for pp in d["pps"]:
        if "acc" not in pp:
            continue
        frames = " ".join(ftbl[i] for i in pp["fs"])
        side = None
        if "tcp_connect" in frames:
            side = "active"
        elif "open_child" in frames or "insert_child" in frames or "tcp_listen" in frames:
            side = "passive"
        kind = None
        if "Counters" in frames and "Connection::new" in frames:
            kind = "counters"
        elif "sockets::Slot" in frames:
            kind = "slots"
        elif (
            "new<tcp::connection::Connection>" in frames
            # `platform::huge_box` with RSSTACK_HUGE_BOX=off: one block per TCB (the only
            # type boxed so; the size check below confirms it).
            or "huge_box::heap_alloc" in frames
        ) and pp["tb"] // pp["tbk"] == sizes["tcb"]:
            kind = "tcb"
        if kind and side:
            counts = unrle(pp["acc"])
            key = (kind, side)
            if key not in found or sum(counts) > sum(found[key]):
                found[key] = counts
    return found


def classify(delta, units, units2):
    """'unit' (touched per primary unit), 'secondary' (per ACK, bulk only), 'occasional', or None."""
    r = delta / units
    if r >= PER_UNIT:
        return "unit"
    if units2 and delta / units2 >= PER_UNIT:
        return "secondary"
    if r >= OCCASIONAL:
        return "occasional"
    return None


def report(label, small, large, units, units2, sizes, fields_of):
    """Prints one workload's table; returns {(kind, side): (classes per byte, accesses per unit per byte)}."""
    result = {}
    a, b = blocks(small, sizes), blocks(large, sizes)
    if not any(k[0] == "tcb" for k in b):
        # DHAT keeps per-byte counts only for blocks of at most 1,024 bytes.
        sys.exit(f"{label}: no TCB block with per-byte counts in {large} (TCB over 1,024 bytes?)")
    print(f"== {label}: {units} units between the runs" + (f", {units2} ACKs" if units2 else ""))
    for key in sorted(b):
        if key not in a or len(a[key]) != len(b[key]):
            print(f"  {key}: no matching block in both runs, skipped")
            continue
        delta = [y - x for x, y in zip(a[key], b[key])]
        kind, side = key
        cls = [classify(max(d, 0), units, units2) for d in delta]
        result[key] = (cls, [max(d, 0) / units for d in delta])
        per = {c: sum(1 for x in cls if x == c) for c in ("unit", "secondary", "occasional")}
        lines = {c: len({i // LINE for i, x in enumerate(cls) if x == c}) for c in per}
        hot = [i for i, x in enumerate(cls) if x in ("unit", "secondary")]
        hot_lines = len({i // LINE for i in hot})
        print(
            f"  {kind:8} {side:7} {len(delta):5} B: per unit {per['unit']} B in {lines['unit']} lines; "
            f"per ACK only {per['secondary']} B; per unit or ACK {len(hot)} B in {hot_lines} lines; "
            f"occasional {per['occasional']} B; byte-accesses per unit {sum(max(d, 0) for d in delta) / units:.1f}"
        )
        per_line = [
            sum(1 for i in range(k, min(k + LINE, len(cls))) if cls[i] in ("unit", "secondary"))
            for k in range(0, len(cls), LINE)
        ]
        print(f"    bytes per unit or ACK by 64-byte line: {' '.join(f'{k}:{n}' for k, n in enumerate(per_line))}")
        fields = fields_of.get(kind)
        if not fields:
            continue
        size = len(delta)
        stride = sizes.get(kind + "_stride")
        groups = {}
        for path, off, fsize in fields(size, stride):
            c = [cls[i] for i in range(off, min(off + fsize, size))]
            comps = path.split(".")
            if kind != "slots":
                top = comps[0]
            elif "conn" in comps:
                top = ".".join(comps[: comps.index("conn") + 1])
            else:
                top = ".".join(comps[:2])
            g = groups.setdefault(top, {"size": 0, "unit": 0, "secondary": 0, "occasional": 0, "fields": []})
            g["size"] += fsize
            for x in c:
                if x:
                    g[x] += 1
            marks = {x for x in c if x}
            if marks:
                top_count = max(max(delta[off:off + fsize]), 0)
                tag = "U" if "unit" in marks else ("A" if "secondary" in marks else "o")
                rate = top_count / (units2 if tag == "A" else units)
                g["fields"].append(f"{path[len(top) + 1:] or path}[{tag}{rate:.2g}]")
        for top, g in groups.items():
            if g["unit"] + g["secondary"] + g["occasional"] == 0:
                continue
            print(
                f"    {top:22} {g['size']:4} B  per unit {g['unit']:3}  per ACK {g['secondary']:3}  "
                f"occasional {g['occasional']:3}  {' '.join(g['fields'])}"
            )
    return result


def compare(name_a, ra, name_b, rb, fields_of):
    """What `name_b` touches per unit (or per ACK) that `name_a` does not, and the reverse."""
    print(f"== {name_b} against {name_a}: fields touched per unit or ACK in one only")
    for key in sorted(set(ra) & set(rb)):
        (ca, pa), (cb, pb) = ra[key], rb[key]
        if len(ca) != len(cb):
            continue
        hot_a = {i for i, x in enumerate(ca) if x in ("unit", "secondary")}
        hot_b = {i for i, x in enumerate(cb) if x in ("unit", "secondary")}
        only_b, only_a = hot_b - hot_a, hot_a - hot_b
        names_b, names_a = [], []
        fields = fields_of.get(key[0])
        for path, off, fsize in fields(len(ca), None) if fields else []:
            span = set(range(off, off + fsize))
            if span & only_b:
                names_b.append(path)
            if span & only_a:
                names_a.append(path)
        print(
            f"  {key[0]:8} {key[1]:7} byte-accesses per unit {sum(pa):.1f} -> {sum(pb):.1f}; "
            f"bytes {len(hot_a)} -> {len(hot_b)}; only in {name_b}: {len(only_b)} B {' '.join(names_b)}; "
            f"only in {name_a}: {len(only_a)} B {' '.join(names_a)}"
        )


def main():
    if len(sys.argv) < 3 or any(len(a.split(":")) not in (4, 5) for a in sys.argv[2:]):
        print("usage:\n" + __doc__.split("usage:\n")[1].strip(), file=sys.stderr)
        sys.exit(2)
    binary = sys.argv[1]
    tcb_t = "tcp::connection::Connection"
    cnt_t = "tcp::connection::counters::Counters"
    slot_t = "stack::sockets::Slot"
    layouts = gdb_layouts(binary, [tcb_t, cnt_t, slot_t, "stack::tcp_sockets::ConnSock"])
    if layouts.get(tcb_t, (None,))[0] is None:
        sys.exit(f"gdb found no layout of {tcb_t} in {binary} (built without debug=2?)")
    sizes = {"tcb": layouts[tcb_t][0]}
    tcb_fields, cnt_fields, slot_fields = [], [], []
    leaves(layouts, tcb_t, 0, "", tcb_fields)
    leaves(layouts, cnt_t, 0, "", cnt_fields)
    slot_size = layouts.get(slot_t, (None, []))[0]
    leaves(layouts, slot_t, 0, "", slot_fields)

    def slot_map(size, _stride):
        """Every slot of the vector (a listener's slot is named as a connection's too)."""
        return [
            (f"slot{k}.{p}", k * slot_size + o, s)
            for k in range(size // slot_size)
            for p, o, s in slot_fields
        ]

    fields_of = {
        "tcb": lambda size, _s: tcb_fields,
        "counters": lambda size, _s: cnt_fields,
        "slots": slot_map,
    }
    print(f"layout: {tcb_t} {sizes['tcb']} B, {cnt_t} {layouts[cnt_t][0]} B, {slot_t} {slot_size} B")
    results = []
    for spec in sys.argv[2:]:
        parts = spec.split(":")
        label, small, large, units = parts[0], parts[1], parts[2], int(parts[3])
        units2 = int(parts[4]) if len(parts) > 4 else 0
        results.append((label.split(" (")[0], report(label, small, large, units, units2, sizes, fields_of)))
    # Header prediction against the full path: each workload named NAME against NAME-ecn.
    named = dict(results)
    for name, r in results:
        if name + "-ecn" in named:
            compare(name, r, name + "-ecn", named[name + "-ecn"], fields_of)


if __name__ == "__main__":
    main()
