# The tables of tables.txt: python3 tables.py <this folder>
import csv, glob, sys, statistics as st, os
d = sys.argv[1]
def rows(f):
    return list(csv.DictReader(open(f)))
def table(pattern_of, variants, col='auto_us'):
    out = {}
    for v in variants:
        for f in sorted(glob.glob(os.path.join(d, pattern_of(v)))):
            for r in rows(f):
                key = (int(r['rows']), int(r['hidden']))
                out.setdefault(key, {}).setdefault(v, []).append((float(r[col]), float(r['sequential_us'])))
    return out
for kind, pat in [('fp8 static', lambda v: f'norm-{v}-thread1-fp8s*.csv'), ('fp8 rows', lambda v: f'norm-{v}-thread1-fp8r*.csv'),
                  ('plain', lambda v: f'norm-{v}-thread1-a.csv')]:
    vs = ['main', 'rcp']
    t = table(pat, vs)
    if not t: continue
    print(f'# {kind}: auto us (turns), v/main per turn, auto/sequential per turn')
    for key in sorted(t, key=lambda k: (k[1], k[0])):
        line = f'{key[0]:5d} x {key[1]:5d}'
        m = t[key].get('main', [])
        for v in vs:
            if v not in t[key]: continue
            a = [x for x, _ in t[key][v]]
            fs = [x / s for x, s in t[key][v]]
            rat = [x / y for (x, _), (y, _) in zip(t[key][v], m)] if v != 'main' and m else []
            line += f' | {v} ' + '/'.join(f'{x:.2f}' for x in a)
            if rat: line += ' (' + '/'.join(f'{x:.3f}' for x in rat) + ')'
            line += ' f/s ' + '/'.join(f'{x:.3f}' for x in fs)
        print(line)
# one-rank copies
for mode in ['g', 'e']:
    fs = sorted(glob.glob(os.path.join(d, f'w1-main-{mode}*.csv')))
    if not fs: continue
    print(f'# w1 all_reduce auto, {"graph" if mode=="g" else "eager"}: fin/main per turn (main us)')
    for f in fs:
        g = f.replace('w1-main-', 'w1-fin-')
        if not os.path.exists(g): continue
        a, b = rows(f), rows(g)
        print(os.path.basename(f), ' '.join(f"{int(x['bytes'])}:{float(y['auto_us'])/float(x['auto_us']):.3f}({float(x['auto_us']):.2f})" for x, y in zip(a, b)))
