/** A tiny alternating benchmark harness: every contender runs once per round, rounds repeat, medians win. */

export interface Contender {
  name: string;
  /** Runs `n` operations. */
  run(n: number): void | Promise<void>;
}

export interface Result {
  name: string;
  nsPerOp: number;
}

/** Runs the contenders in alternation for `rounds` rounds of `n` operations each; returns medians in ns/op. */
export async function compare(contenders: Contender[], n: number, rounds = 7): Promise<Result[]> {
  const samples = new Map<string, number[]>(contenders.map((c) => [c.name, []]));
  for (const c of contenders) await c.run(Math.min(n, 20_000)); // warm-up
  for (let round = 0; round < rounds; round++) {
    // Rotate the order so no contender always runs first after GC.
    const order = contenders.map((_, i) => contenders[(i + round) % contenders.length]);
    for (const c of order) {
      const start = process.hrtime.bigint();
      await c.run(n);
      samples.get(c.name)!.push(Number(process.hrtime.bigint() - start) / n);
    }
  }
  return contenders.map((c) => ({ name: c.name, nsPerOp: median(samples.get(c.name)!) }));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Prints a table with each contender's ratio to `baseline` (how many times faster floodgate is). */
export function print(title: string, results: Result[], baseline: string): void {
  const base = results.find((r) => r.name === baseline)?.nsPerOp;
  console.log(`\n${title}`);
  for (const r of results) {
    const ratio = base ? `${(base / r.nsPerOp).toFixed(2)}× vs ${baseline}` : '';
    console.log(`  ${r.name.padEnd(44)} ${r.nsPerOp.toFixed(1).padStart(8)} ns/op   ${ratio}`);
  }
}
