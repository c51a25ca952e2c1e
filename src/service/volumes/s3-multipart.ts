// Multipart uploads of the S3 API (large weights go up in parts): an upload is a reserved folder of the volume,
// `.svc-multipart/<uploadId>/`, holding the key it is for and its parts as they arrive. Kept inside the volume so
// its parts count against the volume's size and complete by renames on the volume's own filesystem. Completing
// joins the parts named, in order, into the key's file (each part removed once copied, so the volume never holds
// much more than the object); aborting removes the folder.

import { randomBytes } from "node:crypto";
import { open, readFile, writeFile, unlink } from "node:fs/promises";
import { volumeDir } from "../management/context.js";
import { S3Error } from "./s3-errors.js";
import { parseCompleteParts, xmlDocument, xmlFields } from "./s3-xml.js";
import { bucketVolume, sendXml, sizedPayload, volumeFs, writePayload, xmlBody, type S3Call } from "./s3-call.js";
import { createIn, etagOf, keySegments, lstatIn, type VolumeDir } from "./volume-fs.js";

/** S3's bounds: a part is at most 5 GiB, every part but the last at least 5 MiB, at most 10000 parts. */
export const MAX_PART_BYTES = 5 * 1024 ** 3;
export const MIN_PART_BYTES = 5 * 1024 * 1024;
const MAX_PARTS = 10_000;
const KEY_FILE = "key";
const partName = (n: number) => `part-${String(n).padStart(5, "0")}`;

/** The upload's folder, checked to be for this key: NoSuchUpload otherwise. */
async function uploadFor(call: S3Call, uploadId: string): Promise<{ dir: VolumeDir; volume: ReturnType<typeof bucketVolume> }> {
  const volume = bucketVolume(call, call.bucket, true);
  const fs = await volumeFs(call, volume);
  const dir = await fs.uploadDir(uploadId);
  const noSuch = () =>
    new S3Error(
      "NoSuchUpload",
      "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.",
      { fields: { UploadId: uploadId } },
    );
  if (!dir) throw noSuch();
  const key = await readFile(dir.at(KEY_FILE), "utf8").catch(() => undefined);
  if (key !== call.key) {
    await dir.close();
    throw noSuch();
  }
  return { dir, volume };
}

export async function createUpload(call: S3Call): Promise<void> {
  const volume = bucketVolume(call, call.bucket, true);
  const { folder } = keySegments(call.key);
  if (folder) throw new S3Error("InvalidArgument", "A key ending with / is a folder: it has no content");
  await xmlBody(call);
  const uploadId = randomBytes(16).toString("hex");
  const dir = (await (await volumeFs(call, volume)).uploadDir(uploadId, true))!;
  try {
    await writeFile(dir.at(KEY_FILE), call.key, { flag: "wx" });
  } finally {
    await dir.close();
  }
  sendXml(
    call.res,
    200,
    xmlDocument(
      "InitiateMultipartUploadResult",
      xmlFields([
        ["Bucket", volume.id],
        ["Key", call.key],
        ["UploadId", uploadId],
      ]),
    ),
  );
}

export async function uploadPart(call: S3Call, uploadId: string, partText: string): Promise<void> {
  if (!/^\d{1,5}$/.test(partText) || Number(partText) < 1 || Number(partText) > MAX_PARTS) {
    throw new S3Error("InvalidArgument", `Part number must be an integer between 1 and ${MAX_PARTS}, inclusive`);
  }
  const { payload, length } = sizedPayload(call, MAX_PART_BYTES);
  const { dir, volume } = await uploadFor(call, uploadId);
  const name = partName(Number(partText));
  let release: ((written: number) => void) | undefined;
  try {
    const replacing = Number((await lstatIn(dir, name))?.size ?? 0);
    release = await call.deps.usage.reserve(volume, volumeDir(call.deps.dataDir, volume.id), length, replacing);
    const pending = await createIn(dir, name);
    const stat = await writePayload(pending, payload, length);
    release(stat.size - replacing);
    call.res.writeHead(200, { etag: stat.etag });
    call.res.end();
  } catch (err) {
    release?.(0);
    // createIn/commit close the folder; closing it again is harmless.
    await dir.close().catch(() => undefined);
    throw err;
  }
}

export async function completeUpload(call: S3Call, uploadId: string): Promise<void> {
  const parts = parseCompleteParts(await xmlBody(call));
  const { dir, volume } = await uploadFor(call, uploadId);
  const fs = await volumeFs(call, volume);
  const chosen: Array<{ name: string; size: number }> = [];
  try {
    let previous = 0;
    for (const [i, p] of parts.entries()) {
      if (p.partNumber <= previous)
        throw new S3Error("InvalidPartOrder", "The list of parts was not in ascending order. The parts list must be specified in order by part number.");
      previous = p.partNumber;
      const st = await lstatIn(dir, partName(p.partNumber));
      if (!st || etagOf(st) !== (p.etag.startsWith('"') ? p.etag : `"${p.etag}"`)) {
        throw new S3Error(
          "InvalidPart",
          "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.",
          {
            fields: { PartNumber: String(p.partNumber), ETag: p.etag },
          },
        );
      }
      if (i < parts.length - 1 && Number(st.size) < MIN_PART_BYTES) {
        throw new S3Error(
          "EntityTooSmall",
          `Your proposed upload is smaller than the minimum allowed object size: every part but the last must be at least ${MIN_PART_BYTES} bytes`,
          {
            fields: { PartNumber: String(p.partNumber) },
          },
        );
      }
      chosen.push({ name: partName(p.partNumber), size: Number(st.size) });
    }
  } catch (err) {
    await dir.close();
    throw err;
  }
  let stat;
  try {
    const pending = await fs.create(call.key);
    try {
      const buffer = Buffer.allocUnsafe(4 * 1024 * 1024);
      for (const part of chosen) {
        const handle = await open(dir.at(part.name), "r");
        try {
          for (let position = 0; position < part.size; ) {
            const { bytesRead } = await handle.read(buffer, 0, buffer.length, position);
            if (bytesRead === 0) throw new S3Error("InvalidPart", `Part ${part.name} changed while the upload was completed`);
            await pending.handle.write(buffer.subarray(0, bytesRead));
            position += bytesRead;
          }
        } finally {
          await handle.close();
        }
        // Copied: its bytes now live in the object.
        await unlink(dir.at(part.name));
      }
      stat = await pending.commit();
    } catch (err) {
      await pending.discard();
      throw err;
    }
  } finally {
    await dir.close();
  }
  await fs.removeUpload(uploadId);
  // Parts joined, parts not named dropped, an earlier object replaced: measured again at the next write.
  call.deps.usage.forget(volume.id);
  sendXml(
    call.res,
    200,
    xmlDocument(
      "CompleteMultipartUploadResult",
      xmlFields([
        ["Location", `/s3/${volume.id}/${encodeURIComponent(call.key).replace(/%2F/g, "/")}`],
        ["Bucket", volume.id],
        ["Key", call.key],
        ["ETag", stat.etag],
      ]),
    ),
  );
}

export async function abortUpload(call: S3Call, uploadId: string): Promise<void> {
  call.req.resume();
  const { dir, volume } = await uploadFor(call, uploadId);
  await dir.close();
  await (await volumeFs(call, volume)).removeUpload(uploadId);
  call.deps.usage.forget(volume.id);
  call.res.writeHead(204);
  call.res.end();
}
