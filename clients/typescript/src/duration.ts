// Go durations ("500ms", "1m30s"), the API's spelling of every length of
// time, read exactly: nanoseconds as a bigint, since 8760h (the longest
// period) is more nanoseconds than a number holds exactly.

const unitNanos: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  "µs": 1_000n, // U+00B5, as Go spells it
  "μs": 1_000n, // U+03BC, which Go accepts too
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

const part = /^([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)/;

/**
 * parseDuration reads a Go duration as Go's time.ParseDuration does, and
 * returns its nanoseconds, or undefined when `text` is not one. Fractions
 * below a nanosecond are dropped, as Go drops them.
 */
export function parseDuration(text: string): bigint | undefined {
  let rest = text;
  let sign = 1n;
  if (rest.startsWith("-") || rest.startsWith("+")) {
    sign = rest.startsWith("-") ? -1n : 1n;
    rest = rest.slice(1);
  }
  if (rest === "0") {
    return 0n;
  }
  if (rest === "") {
    return undefined;
  }
  let total = 0n;
  while (rest !== "") {
    const m = part.exec(rest);
    if (m === null || (m[1] === "" && (m[2] === undefined || m[2] === ""))) {
      return undefined;
    }
    const unit = unitNanos[m[3]];
    total += BigInt(m[1] || "0") * unit;
    if (m[2]) {
      total += (BigInt(m[2]) * unit) / 10n ** BigInt(m[2].length);
    }
    rest = rest.slice(m[0].length);
  }
  return sign * total;
}

/** durationMs is parseDuration in whole milliseconds, rounded up. */
export function durationMs(text: string): number | undefined {
  const nanos = parseDuration(text);
  return nanos === undefined ? undefined : Number((nanos + 999_999n) / 1_000_000n);
}
