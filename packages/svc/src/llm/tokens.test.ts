import { describe, expect, it } from "vitest";
import { countTokens, renderChatPrompt, TokenCounter, TokenLimiter, tokenize } from "./tokens.js";

describe("tokenize", () => {
  it("splits words and punctuation, whitespace attached to the next token", () => {
    expect(tokenize("Hello, world! It's 2024.")).toEqual(["Hello", ",", " world", "!", " It's", " 2024", "."]);
    expect(tokenize("  two  spaces\nthen end  ")).toEqual(["  two", "  spaces", "\nthen", " end", "  "]);
    expect(tokenize("")).toEqual([]);
    expect(countTokens("naïve café — ok")).toBe(4);
  });

  it("gives back the text exactly when joined", () => {
    const text = "Line one.\n\n  Line\ttwo, with: symbols {}[] and ünïcödé — 3.14!  ";
    expect(tokenize(text).join("")).toBe(text);
  });

  it("renders a chat prompt with role markers", () => {
    expect(
      renderChatPrompt([
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hi" },
      ]),
    ).toBe("<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n");
  });
});

describe("TokenCounter", () => {
  it("counts text arriving in pieces as if it were whole, however it is split", () => {
    const text = "The keeper climbed the stairs, counting   each step; the light turned. Done!\n";
    for (let seed = 1; seed <= 50; seed++) {
      const counter = new TokenCounter();
      let at = 0;
      let s = seed;
      while (at < text.length) {
        s = (s * 1103515245 + 12345) % 2 ** 31;
        const size = 1 + (s % 7);
        counter.push(text.slice(at, at + size));
        at += size;
      }
      expect(counter.count).toBe(countTokens(text));
    }
  });
});

describe("TokenLimiter", () => {
  it("lets whole pieces through below the limit", () => {
    const limiter = new TokenLimiter(5);
    expect(limiter.push("Hello")).toBe("Hello");
    expect(limiter.push(" world")).toBe(" world");
    expect(limiter.count).toBe(2);
    expect(limiter.reached).toBe(false);
  });

  it("cuts the piece that passes the limit at a token boundary", () => {
    const limiter = new TokenLimiter(3);
    expect(limiter.push("One")).toBe("One");
    expect(limiter.push(" two three four")).toBe(" two three");
    expect(limiter.reached).toBe(true);
    expect(limiter.count).toBe(3);
    expect(limiter.push(" five")).toBe("");
  });

  it("lets a token still growing grow without counting it twice", () => {
    const limiter = new TokenLimiter(2);
    expect(limiter.push("Hel")).toBe("Hel");
    expect(limiter.push("lo")).toBe("lo");
    expect(limiter.count).toBe(1);
    expect(limiter.push(" big world")).toBe(" big");
    expect(limiter.count).toBe(2);
  });
});
