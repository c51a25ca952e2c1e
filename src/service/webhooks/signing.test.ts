import { describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { newSigningSecret, sign, signedHeaders } from "./signing.js";

// The example of the specification's reference libraries: this secret, id, timestamp and body sign to this.
const EXAMPLE = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};

describe("Standard Webhooks signatures", () => {
  it("sign the specification's example as its libraries do", () => {
    expect(sign(EXAMPLE.secret, EXAMPLE.id, EXAMPLE.timestamp, EXAMPLE.body)).toBe(EXAMPLE.signature);
    expect(new Webhook(EXAMPLE.secret).sign(EXAMPLE.id, new Date(EXAMPLE.timestamp * 1000), EXAMPLE.body)).toBe(EXAMPLE.signature);
  });

  it("make headers the standardwebhooks verifier accepts, with each of several secrets, and it refuses a tampered body or another secret", () => {
    const current = newSigningSecret();
    const previous = newSigningSecret();
    expect(current).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const body = JSON.stringify({ id: "job-1", status: "COMPLETED", output: { n: 1 } });
    const headers = signedHeaders([current, previous], "msg_1", Date.now(), body);
    expect(headers["webhook-id"]).toBe("msg_1");
    expect(headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    expect(new Webhook(current).verify(body, headers)).toEqual(JSON.parse(body));
    expect(new Webhook(previous).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(newSigningSecret()).verify(body, headers)).toThrow(/No matching signature/);
    expect(() => new Webhook(current).verify(body.replace("COMPLETED", "FAILED"), headers)).toThrow(/No matching signature/);
  });

  it("leave the signature out when there is no secret, and date each attempt (the verifier refuses an old timestamp)", () => {
    const headers = signedHeaders([], "msg_2", 1_700_000_000_000, "{}");
    expect(headers).toEqual({ "webhook-id": "msg_2", "webhook-timestamp": "1700000000" });
    const secret = newSigningSecret();
    expect(() => new Webhook(secret).verify("{}", signedHeaders([secret], "msg_3", Date.now() - 10 * 60_000, "{}"))).toThrow(/too old/);
  });
});
