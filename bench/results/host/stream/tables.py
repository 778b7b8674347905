# The tables of README.md from the CSVs here: python3 tables.py
import csv
def rd(f): return {(int(r['rows']), int(r['hidden'])): r for r in csv.DictReader(open(f))}
for coll, cols in [('all_reduce_rmsnorm', ['oneshot_us', 'twoshot_us', 'auto_us', 'sequential_us']),
                   ('reduce_scatter_rmsnorm', ['pull_us', 'auto_us', 'sequential_us'])]:
    for d in ['fp32', 'bf16', 'fp16']:
        m = [rd(f'{coll}-{d}-main-{t}.csv') for t in (1, 2)]
        h = [rd(f'{coll}-{d}-hs-{t}.csv') for t in (1, 2)]
        print(f'## {coll} {d}: hs/main per column (two turns); auto over sequential, main then hs')
        print('| shape | ' + ' | '.join(c[:-3] for c in cols) + ' | auto/seq main | auto/seq hs |')
        print('|---' * (len(cols) + 3) + '|')
        for k in sorted(m[0], key=lambda k: (k[1], k[0])):
            cells = ['/'.join(f"{float(h[t][k][c]) / float(m[t][k][c]):.2f}" for t in (0, 1)) for c in cols]
            fm = '/'.join(f"{float(m[t][k]['auto_us']) / float(m[t][k]['sequential_us']):.2f}" for t in (0, 1))
            fh = '/'.join(f"{float(h[t][k]['auto_us']) / float(h[t][k]['sequential_us']):.2f}" for t in (0, 1))
            print(f'| {k[0]} x {k[1]} | ' + ' | '.join(cells) + f' | {fm} | {fh} |')
        print()
