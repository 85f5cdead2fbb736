#!/usr/bin/env python3
"""Splits a callgrind profile of the simulator (`soak_rate`) into what the stacks cost and what
the simulator around them costs, per frame delivered.

Usage: sim-callgrind-split.py CALLGRIND_OUT FRAMES [ONE_TIME_IR]

Each group's cost is the inclusive cost of the call edges entering it from outside (callgrind
records an inclusive cost per call edge): the stacks are the symbols of `stack`, `tcp` and
`wire`; the NIC model, shard core and steering those of `nic`, `shard` and `rss`, less the
stack and application calls they make; the applications are `sim::workload` code entered from
the shard cores, less their stack calls; stack calls from the workloads' checkers (the TCB
walk, the one-owner check's live tuples) are counted apart; the rest (world, links, trace,
the per-event checkers, the workload loop, each seed's set-up) is what remains.
ONE_TIME_IR (the pattern table's build, made inside the first application call) is left
out of the applications and of the total. Groups go by the symbol's crate prefix, so code
inlined across crates counts where it was inlined.
"""
import re
import sys
from collections import defaultdict


def parse(path):
    names = {}
    def name(tok):
        m = re.match(r'\((\d+)\)(?: (.*))?', tok)
        if not m:
            return tok
        i, n = m.group(1), m.group(2)
        if n is not None:
            names[i] = n
        return names.get(i, i)
    edges = defaultdict(int)
    self_cost = defaultdict(int)
    total = 0
    fn = None; cfn = None; pending = False
    for line in open(path, errors='replace'):
        line = line.rstrip('\n')
        if not line:
            continue
        if line.startswith('fn='):
            fn = name(line[3:]); continue
        if line.startswith('cfn='):
            cfn = name(line[4:]); continue
        if line.startswith('calls='):
            pending = True; continue
        if line.startswith('summary:') or line.startswith('totals:'):
            total = int(line.split()[1]); continue
        c = line[0]
        if c.isdigit() or c in '+-*':
            parts = line.split()
            cost = int(parts[1]) if len(parts) > 1 else 0
            if pending:
                edges[(fn, cfn)] += cost
                pending = False
            else:
                self_cost[fn] += cost
            continue
        if '=' in line.split()[0]:
            continue
    return edges, self_cost, total


def is_stack(n): return re.match(r'^<?(stack|tcp|wire)::', n or '') is not None
def is_shard(n): return re.match(r'^<?(nic|shard|rss)::', n or '') is not None
def is_engine(n): return re.match(r'^<?offload::', n or '') is not None
def is_app(n): return re.match(r'^<?sim::workload', n or '') is not None

try:
    path, frames = sys.argv[1], int(sys.argv[2])
    once = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    if frames < 1 or len(sys.argv) > 4:
        raise ValueError
except (IndexError, ValueError):
    print('usage: sim-callgrind-split.py CALLGRIND_OUT FRAMES>0 [ONE_TIME_IR]', file=sys.stderr)
    sys.exit(2)
edges, self_cost, total = parse(path)
walk = sum(c for (a, b), c in edges.items() if is_stack(b) and not is_stack(a) and 'invariant_violation' in b)
stack_all = sum(c for (a, b), c in edges.items() if is_stack(b) and not is_stack(a)) - walk
CHECKERS = r'one_owner_each|check|::run|ServerTotals|pick_move|Owners|reset_violation|record'
stack_from_app = sum(c for (a, b), c in edges.items() if is_stack(b) and is_app(a) and not re.search(CHECKERS, a))
stack_from_checkers = sum(c for (a, b), c in edges.items() if is_stack(b) and is_app(a) and re.search(CHECKERS, a)) - walk
stack_from_shard = sum(c for (a, b), c in edges.items() if is_stack(b) and is_shard(a))
stack_from_engine = sum(c for (a, b), c in edges.items() if is_stack(b) and is_engine(a))
app_incl = sum(c for (a, b), c in edges.items() if is_app(b) and is_shard(a))
shard_incl = sum(c for (a, b), c in edges.items() if is_shard(b) and not is_shard(a))
engine_incl = sum(c for (a, b), c in edges.items() if is_engine(b) and not is_engine(a))
# Apps are called by the shard core; their stack calls are sim::workload -> stack edges.
app_own = app_incl - stack_from_app - once
shard_own = shard_incl - stack_from_shard - app_incl
engine_own = engine_incl - stack_from_engine
rest = total - once - stack_all - walk - app_own - shard_own - engine_own
stack_traffic = stack_all - stack_from_checkers
n = total - once
def row(label, v):
    print(f'| {label} | {v/frames:,.0f} | {100*v/n:.1f} % |')
print(f'total {total:,}, one-time table {once:,}, frames {frames}: {n/frames:,.0f} per frame')
row('the stacks for traffic (inclusive: stack, tcp, wire and what they call)', stack_traffic)
row('  of which called by the shard cores (receive, transmit, timers)', stack_from_shard)
row('  of which called by the applications (send, recv, connect, close)', stack_from_app)
row('  of which called by the offload engine', stack_from_engine)
row('NIC model, shard core, steering (own)', shard_own)
row('offload engine and host layer (own)', engine_own)
row('applications and pattern checks (own)', app_own)
row('checker: TCB invariant walk', walk)
row('checkers: stack queries (live tuples for the one-owner check, counters)', stack_from_checkers)
row('world, links, trace, checkers, workload loop (rest)', rest)
