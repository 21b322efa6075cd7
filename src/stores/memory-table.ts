/**
 * Compact in-memory storage of many algorithm states: `width` numbers per slot in one `Float64Array`, with a
 * free list so dropped slots are reused. A slot costs `8 × width` bytes; there is no object per partition.
 */
export class MemoryTable {
  /** The states, `width` numbers per slot. Replaced (grown) on allocation; do not keep a reference across calls. */
  states: Float64Array;
  private readonly free: number[] = [];
  /** Per slot, how many times it was released: a refund checks that its slot still holds the same partition. */
  private readonly generations: number[] = [];
  private highWater = 0;
  private live = 0;

  constructor(
    readonly width: number,
    initialCapacity = 1,
  ) {
    this.states = new Float64Array(Math.max(1, initialCapacity) * width);
  }

  /** Slots in use. */
  get size(): number {
    return this.live;
  }

  /** The highest slot index ever used, plus one: the range a sweep walks. */
  get extent(): number {
    return this.highWater;
  }

  /** Takes a slot (its state is left for the caller to initialise). */
  allocate(): number {
    this.live++;
    const reused = this.free.pop();
    if (reused !== undefined) return reused;
    const slot = this.highWater++;
    if ((slot + 1) * this.width > this.states.length) {
      const grown = new Float64Array(this.states.length * 2);
      grown.set(this.states);
      this.states = grown;
    }
    return slot;
  }

  /** How many times `slot` was released so far. */
  generation(slot: number): number {
    return this.generations[slot] ?? 0;
  }

  /** Makes `slot` a new partition in place (a reset): leases granted before no longer refund into it. */
  renew(slot: number): void {
    this.generations[slot] = this.generation(slot) + 1;
  }

  /** Returns a slot to the free list. */
  release(slot: number): void {
    this.generations[slot] = this.generation(slot) + 1;
    this.live--;
    this.free.push(slot);
  }
}
