import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { SlotSet, type Slotted } from "../../gateway/base/slot-set.ts";

class Item implements Slotted {
  slot = -1;
  readonly name: string;
  constructor(name: string) {
    this.name = name;
  }
}

const names = (set: SlotSet<Item>) => set.values().map((item) => item.name).sort();

describe("SlotSet", () => {
  it("holds each item once, and forgets a removed one", () => {
    const set = new SlotSet<Item>();
    const [a, b, c] = [new Item("a"), new Item("b"), new Item("c")];
    set.add(a);
    set.add(b);
    set.add(a);
    set.add(c);
    expect(set.size).toBe(3);
    expect(set.delete(a)).toBe(true);
    expect(set.delete(a)).toBe(false);
    expect(set.has(a)).toBe(false);
    expect(a.slot).toBe(-1);
    expect(set.has(b) && set.has(c)).toBe(true);
    expect(names(set)).toEqual(["b", "c"]);
  });

  it("keeps every other item when one in the middle or at the end goes", () => {
    const set = new SlotSet<Item>();
    const items = Array.from({ length: 6 }, (_, index) => new Item(String(index)));
    for (const item of items) set.add(item);
    set.delete(items[1]);
    set.delete(items[5]);
    set.delete(items[0]);
    expect(names(set)).toEqual(["2", "3", "4"]);
    for (const item of [items[2], items[3], items[4]]) expect(set.has(item)).toBe(true);
    set.add(items[0]);
    expect(names(set)).toEqual(["0", "2", "3", "4"]);
    for (const item of set.values()) set.delete(item);
    expect(set.size).toBe(0);
    expect(set.values()).toEqual([]);
  });

  it("gives a copy to walk: items removed or added meanwhile do not change it", () => {
    const set = new SlotSet<Item>();
    const [a, b, c] = [new Item("a"), new Item("b"), new Item("c")];
    set.add(a);
    set.add(b);
    const walked: string[] = [];
    for (const item of set.values()) {
      walked.push(item.name);
      set.delete(a);
      set.delete(b);
      set.add(c);
    }
    expect(walked).toEqual(["a", "b"]);
    expect(names(set)).toEqual(["c"]);
  });

  it("does not take an item of another set for its own", () => {
    const [one, two] = [new SlotSet<Item>(), new SlotSet<Item>()];
    const [a, b] = [new Item("a"), new Item("b")];
    one.add(a);
    two.add(b);
    expect(one.has(b)).toBe(false);
    expect(one.delete(b)).toBe(false);
    expect(two.has(b)).toBe(true);
  });

  it("keeps nothing of a removed item: once dropped, it can be collected", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const set = new SlotSet<Item>();
    const kept = new Item("kept");
    set.add(kept);
    let refs: WeakRef<Item>[] = [];
    (() => {
      const gone = Array.from({ length: 100 }, (_, index) => new Item(`gone ${index}`));
      for (const item of gone) set.add(item);
      for (const item of gone) set.delete(item);
      refs = gone.map((item) => new WeakRef(item));
    })();
    // A WeakRef's target is kept until the current job ends: this turn of the event loop is the
    // behaviour, not a wait for a condition.
    await new Promise((resolve) => setTimeout(resolve, 0));
    gc();
    expect(refs.filter((ref) => ref.deref() !== undefined)).toHaveLength(0);
    expect(names(set)).toEqual(["kept"]);
  });
});
