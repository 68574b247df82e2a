/** Median µs per call of `fn` over `rounds` rounds of `calls` calls each (the benches' timer). */
export function microsPerCall(fn: () => unknown, calls: number, rounds = 15): number {
  const perCall: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const start = performance.now();
    for (let i = 0; i < calls; i++) fn();
    perCall.push(((performance.now() - start) * 1000) / calls);
  }
  perCall.sort((a, b) => a - b);
  return perCall[Math.floor(perCall.length / 2)];
}
