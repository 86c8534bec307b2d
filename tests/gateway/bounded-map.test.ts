import { describe, expect, it } from "vitest";
import { BoundedMap } from "../../shared/bounded-map.ts";

describe("BoundedMap", () => {
  it("builds a value once and keeps it", () => {
    const map = new BoundedMap<string, number>(4);
    let builds = 0;
    const build = (key: string) => {
      builds++;
      return key.length;
    };
    expect(map.getOrBuild("abc", build)).toBe(3);
    expect(map.getOrBuild("abc", build)).toBe(3);
    expect(builds).toBe(1);
  });

  it("never holds more than its bound: a new key when full starts it afresh", () => {
    const map = new BoundedMap<number, number>(3);
    for (let key = 0; key < 3; key++) map.set(key, key);
    map.set(1, 10); // a kept key is replaced, nothing dropped
    expect(map.size).toBe(3);
    expect(map.get(1)).toBe(10);
    map.set(3, 3);
    expect(map.size).toBe(1);
    expect(map.get(0)).toBeUndefined();
    expect(map.get(3)).toBe(3);
  });
});
