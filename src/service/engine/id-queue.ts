// A FIFO of job ids with cheap push/shift/unshift. Removal is lazy: the engine skips ids whose job is no longer
// queued when it pops them.

export class IdQueue {
  private items: string[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(id: string): void {
    this.items.push(id);
  }

  /** Put an id back at the front (a job whose attempt was lost keeps its place). */
  unshift(id: string): void {
    if (this.head > 0) this.items[--this.head] = id;
    else this.items.unshift(id);
  }

  shift(): string | undefined {
    if (this.head >= this.items.length) return undefined;
    const id = this.items[this.head++];
    // Compact now and then so the array does not grow without bound.
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return id;
  }

  *[Symbol.iterator](): Iterator<string> {
    for (let i = this.head; i < this.items.length; i++) yield this.items[i]!;
  }

  clear(): void {
    this.items = [];
    this.head = 0;
  }
}
