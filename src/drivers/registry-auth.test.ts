import { describe, expect, it } from "vitest";
import { dockerAuthConfig, dockerConfigJson, ImagePullError, isImagePullError, pullFailureReason, registryHostOf } from "./registry-auth.js";

const creds = { name: "ghcr", username: "me", password: "pw" };

describe("registry credentials for a pull", () => {
  it("finds the registry an image names, as Docker reads it", () => {
    expect(registryHostOf("127.0.0.1:5000/team/worker:1")).toBe("127.0.0.1:5000");
    expect(registryHostOf("ghcr.io/acme/worker@sha256:abc")).toBe("ghcr.io");
    expect(registryHostOf("localhost/worker")).toBe("localhost");
    expect(registryHostOf("acme/worker:1")).toBe("docker.io");
    expect(registryHostOf("ubuntu")).toBe("docker.io");
  });

  it("gives Docker the credentials for the image's registry, Docker Hub by its index address", () => {
    expect(dockerAuthConfig(creds, "ghcr.io/acme/w:1")).toEqual({ username: "me", password: "pw", serveraddress: "ghcr.io" });
    expect(dockerAuthConfig(creds, "acme/w:1").serveraddress).toBe("https://index.docker.io/v1/");
    expect(JSON.parse(dockerConfigJson(creds, "127.0.0.1:5000/w:1"))).toEqual({
      auths: { "127.0.0.1:5000": { username: "me", password: "pw", auth: Buffer.from("me:pw").toString("base64") } },
    });
  });

  it("says why a pull failed in a few words, naming the image and the registry auth", () => {
    expect(pullFailureReason('Head "http://127.0.0.1:5000/v2/w/manifests/1": no basic auth credentials')).toBe("unauthorized");
    expect(pullFailureReason("unauthorized: authentication required")).toBe("unauthorized");
    expect(pullFailureReason("manifest for 127.0.0.1:5000/w:2 not found: manifest unknown")).toMatch(/^not found \(/);
    const err = new ImagePullError("127.0.0.1:5000/w:1", "unauthorized", creds);
    expect(err.message).toBe('pulling "127.0.0.1:5000/w:1" failed: unauthorized (registry auth "ghcr")');
    expect(isImagePullError(err)).toBe(true);
    expect(new ImagePullError("w:1", "not found (x)", undefined).message).toBe('pulling "w:1" failed: not found (x) (no registry auth)');
  });
});
