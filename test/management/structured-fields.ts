// A small parser for RFC 9651 structured-field lists (items with parameters; inner lists are not needed by
// the RateLimit headers and are refused). Used by the tests to read RateLimit and RateLimit-Policy as a client would.

export type BareItem = number | string | boolean | { token: string };
export interface ListMember {
  value: BareItem;
  params: Record<string, BareItem>;
}

export function parseList(input: string): ListMember[] {
  let i = 0;
  const s = input;
  const fail = (what: string): never => {
    throw new Error(`structured field: ${what} at ${i} in ${JSON.stringify(s)}`);
  };
  const skipSP = () => {
    while (s[i] === " ") i++;
  };
  const skipOWS = () => {
    while (s[i] === " " || s[i] === "\t") i++;
  };
  const key = (): string => {
    const m = /^[a-z*][a-z0-9_\-.*]*/.exec(s.slice(i));
    if (!m) return fail("key expected");
    i += m[0].length;
    return m[0];
  };
  const bare = (): BareItem => {
    const c = s[i];
    if (c === '"') {
      i++;
      let out = "";
      for (;;) {
        const ch = s[i++];
        if (ch === undefined) return fail("unterminated string");
        if (ch === "\\") {
          const next = s[i++];
          if (next !== '"' && next !== "\\") return fail("bad escape");
          out += next;
        } else if (ch === '"') return out;
        else if (ch < " " || ch > "~") return fail("bad string character");
        else out += ch;
      }
    }
    if (c === "?") {
      i++;
      const b = s[i++];
      if (b === "1") return true;
      if (b === "0") return false;
      return fail("bad boolean");
    }
    const num = /^-?\d{1,15}(\.\d{1,3})?/.exec(s.slice(i));
    if (num) {
      i += num[0].length;
      return Number(num[0]);
    }
    const token = /^[A-Za-z*][A-Za-z0-9!#$%&'*+\-.^_`|~:/]*/.exec(s.slice(i));
    if (token) {
      i += token[0].length;
      return { token: token[0] };
    }
    return fail("item expected");
  };
  const params = (): Record<string, BareItem> => {
    const out: Record<string, BareItem> = {};
    while (s[i] === ";") {
      i++;
      skipSP();
      const k = key();
      let v: BareItem = true;
      if (s[i] === "=") {
        i++;
        v = bare();
      }
      out[k] = v;
    }
    return out;
  };
  const members: ListMember[] = [];
  skipSP();
  if (i >= s.length) return members;
  for (;;) {
    if (s[i] === "(") fail("inner lists are not supported");
    const value = bare();
    members.push({ value, params: params() });
    skipOWS();
    if (i >= s.length) return members;
    if (s[i] !== ",") fail("comma expected");
    i++;
    skipOWS();
    if (i >= s.length) fail("trailing comma");
  }
}

/** `"minute";r=5;t=30, ...` as { minute: { r: 5, t: 30 }, ... }. */
export function byName(input: string): Record<string, Record<string, BareItem>> {
  return Object.fromEntries(parseList(input).map((m) => [m.value as string, m.params]));
}
