import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { parseDuration } from "../src/duration.js";

describe("Go durations", () => {
  const cases: Array<[string, bigint | undefined]> = [
    ["0", 0n],
    ["300ms", 300_000_000n],
    ["1m30s", 90_000_000_000n],
    ["1.5h", 5_400_000_000_000n],
    [".5s", 500_000_000n],
    ["1.s", 1_000_000_000n],
    ["2µs", 2_000n],
    ["-1s", -1_000_000_000n],
    ["8760h", 31_536_000_000_000_000n],
    ["", undefined],
    ["1", undefined],
    ["1d", undefined],
    ["s", undefined],
    [".s", undefined],
    ["1s ", undefined],
  ];
  for (const [text, want] of cases) {
    it(`reads ${JSON.stringify(text)} as Go does`, () => assert.equal(parseDuration(text), want));
  }
});
