import { errorMessage } from "../errors.js";
import { parseRateLimits } from "./keys/ratelimit.js";
import { parseUserQuotas } from "./engine/quotas.js";
import { storeUrlProblem } from "./store/url.js";
import { envPatternProblem } from "../drivers/host-env.js";
import { parseVolumeDriverOptions } from "../drivers/cluster-volumes.js";
import { parseWebhookAllow } from "./webhooks/address-policy.js";

/** What a setting's raw text must be, and what it is parsed into. */
export type Kind =
  | { type: "string" }
  | { type: "secret" }
  | { type: "storeUrl" }
  | { type: "port" }
  | { type: "portOrOff" }
  | { type: "positive" }
  | { type: "nonNegative" }
  | { type: "count" }
  | { type: "enum"; values: readonly string[] }
  | { type: "onOff" }
  | { type: "list" }
  | { type: "envNames" }
  | { type: "ports" }
  | { type: "webhookAllow" }
  | { type: "url" }
  | { type: "size" }
  | { type: "rateLimits" }
  | { type: "userQuotas" }
  | { type: "volumeDriverOptions" }
  | { type: "absolutePath" };

/** One row of the settings table: its key in the configuration, its flag or variable, kind, default and meaning. */
export interface Setting {
  key: string;
  flag?: string;
  env?: string;
  kind: Kind;
  default?: unknown;
  /** The server only (not `svc dev`). */
  serverOnly?: boolean;
  description: string;
}

export const positive: Kind = { type: "positive" };

/** A comma-separated value's items, trimmed, empty ones left out. */
function listItems(raw: string): string[] {
  return raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A setting's raw text parsed by its kind; `origin` (the flag or variable) names it in the problem. Pure. */
export function parseValue(setting: Setting, raw: string, origin: string): { value?: unknown; problem?: string } {
  const kind = setting.kind;
  switch (kind.type) {
    case "string":
    case "secret":
      return raw === "" ? { problem: `${origin} is empty` } : { value: raw };
    case "absolutePath":
      return raw.startsWith("/") && !raw.split("/").includes("..")
        ? { value: raw.length > 1 ? raw.replace(/\/+$/, "") : raw }
        : { problem: `${origin} must be an absolute path on the nodes (e.g. /var/lib/svc-models), not "${raw}"` };
    case "storeUrl": {
      const problem = storeUrlProblem(raw);
      return problem ? { problem: `${origin} ${problem}` } : { value: raw };
    }
    case "port": {
      const n = Number(raw);
      return Number.isInteger(n) && n >= 0 && n <= 65535 ? { value: n } : { problem: `${origin} must be 0..65535, not "${raw}"` };
    }
    case "portOrOff": {
      if (raw === "off") return { value: null };
      const n = Number(raw);
      return Number.isInteger(n) && n >= 0 && n <= 65535 ? { value: n } : { problem: `${origin} must be 0..65535 or "off", not "${raw}"` };
    }
    case "positive": {
      const n = Number(raw);
      return Number.isInteger(n) && n > 0 ? { value: n } : { problem: `${origin} must be a positive whole number, not "${raw}"` };
    }
    case "nonNegative": {
      const n = Number(raw);
      return Number.isInteger(n) && n >= 0 ? { value: n } : { problem: `${origin} must be a whole number (0 or more), not "${raw}"` };
    }
    case "url": {
      let u: URL;
      try {
        u = new URL(raw);
      } catch {
        return { problem: `${origin} must be an http or https address, not "${raw}"` };
      }
      return u.protocol === "http:" || u.protocol === "https:"
        ? { value: raw.replace(/\/+$/, "") }
        : { problem: `${origin} must be an http or https address, not "${raw}"` };
    }
    case "size": {
      const m = /^(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?$/.exec(raw.trim());
      const scale = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[(m?.[2] ?? "").toLowerCase() as "" | "k" | "m" | "g" | "t"];
      const n = m ? Math.floor(Number(m[1]) * scale) : Number.NaN;
      return n > 0 ? { value: n } : { problem: `${origin} must be a size such as 500M, 200G or 1T (bytes when no unit), not "${raw}"` };
    }
    case "count": {
      const n = Number(raw);
      return Number.isInteger(n) && n >= 0 && n <= 64 ? { value: n } : { problem: `${origin} must be a whole number from 0 to 64, not "${raw}"` };
    }
    case "enum":
      return kind.values.includes(raw) ? { value: raw } : { problem: `${origin} must be ${kind.values.map((v) => `"${v}"`).join(", ")}, not "${raw}"` };
    case "onOff":
      if (["on", "1", "true"].includes(raw)) return { value: true };
      if (["off", "0", "false"].includes(raw)) return { value: false };
      return { problem: `${origin} must be "on" or "off", not "${raw}"` };
    case "list": {
      const items = listItems(raw);
      return items.length > 0 ? { value: items } : { problem: `${origin} lists nothing` };
    }
    case "ports": {
      const items = listItems(raw);
      const bad = items.filter((p) => !/^\d{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535);
      if (bad.length > 0) return { problem: `${origin}: not a port (1-65535): ${bad.join(", ")}` };
      return items.length > 0 ? { value: items.map(Number) } : { problem: `${origin} lists nothing` };
    }
    case "envNames": {
      const items = listItems(raw);
      const problems = items.map(envPatternProblem).filter((p): p is string => p !== undefined);
      if (problems.length > 0) return { problem: `${origin}: ${problems.join("; ")}` };
      return items.length > 0 ? { value: items } : { problem: `${origin} lists nothing` };
    }
    case "webhookAllow": {
      const items = listItems(raw);
      const { problems } = parseWebhookAllow(items);
      if (problems.length > 0) return { problem: `${origin}: ${problems.join("; ")}` };
      return items.length > 0 ? { value: items } : { problem: `${origin} lists nothing` };
    }
    case "volumeDriverOptions": {
      const { options, problem } = parseVolumeDriverOptions(raw);
      return problem ? { problem: `${origin} ${problem}` } : { value: options };
    }
    case "userQuotas":
      try {
        return { value: parseUserQuotas(raw) };
      } catch (err) {
        return { problem: `${origin}: ${errorMessage(err)}` };
      }
    case "rateLimits":
      try {
        return { value: parseRateLimits(raw) };
      } catch (err) {
        return { problem: `${origin}: ${errorMessage(err)}` };
      }
  }
}
