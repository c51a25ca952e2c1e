// Network volumes as storage: an S3-compatible API on them (s3.ts), access keys for it (keys.ts), and the bytes
// each holds against its size (usage.ts). docs/volumes.md.

import type { SecretBox } from "../secrets/box.js";
import type { VolumeKeyStore } from "./key-store.js";
import type { VolumeUsage } from "./usage.js";

/** What the management API uses of volumes' storage. */
export interface VolumesApi {
  keys: VolumeKeyStore;
  box: SecretBox;
  usage: VolumeUsage;
  /** The S3 API's address (`<service url>/s3`). */
  endpoint: string;
  region: string;
}
