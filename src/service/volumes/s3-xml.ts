// The two request bodies of the S3 API that are XML (DeleteObjects' <Delete>, CompleteMultipartUpload's
// <CompleteMultipartUpload>) and the documents it answers. Both request shapes are flat lists of small elements,
// read here without a general XML parser; anything else is MalformedXML.

import { S3Error, xmlText } from "./s3-errors.js";

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/** Element text with its entity and character references replaced. Pure. */
export function xmlDecode(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, ref: string) => {
    if (ref.startsWith("#x")) return String.fromCodePoint(parseInt(ref.slice(2), 16));
    if (ref.startsWith("#")) return String.fromCodePoint(parseInt(ref.slice(1), 10));
    const named = ENTITIES[ref];
    if (named === undefined) throw new S3Error("MalformedXML", `Unknown XML entity ${whole}`);
    return named;
  });
}

/** The contents of each `<name>...</name>` in `xml`, in order (not nested in one another). Pure. */
export function elements(xml: string, name: string): string[] {
  const out: string[] = [];
  const pattern = new RegExp(`<${name}(?:\\s[^>]*)?>([\\s\\S]*?)</${name}>`, "g");
  for (const m of xml.matchAll(pattern)) out.push(m[1]!);
  return out;
}

/** The decoded text of the one `<name>` in `xml`, or undefined. Pure. */
export function elementText(xml: string, name: string): string | undefined {
  const found = elements(xml, name);
  if (found.length > 1) throw new S3Error("MalformedXML", `<${name}> is given more than once`);
  const text = found[0];
  if (text === undefined) return undefined;
  const cdata = /^<!\[CDATA\[([\s\S]*)\]\]>$/.exec(text);
  return cdata ? cdata[1]! : xmlDecode(text);
}

/** DeleteObjects' body: the keys and whether the answer lists only failures. Pure. */
export function parseDelete(xml: string): { keys: string[]; quiet: boolean } {
  if (!/<Delete[\s>]/.test(xml)) throw new S3Error("MalformedXML", "The body must be a <Delete> document");
  const keys = elements(xml, "Object").map((o) => {
    const key = elementText(o, "Key");
    if (key === undefined || key === "") throw new S3Error("MalformedXML", "Each <Object> needs a <Key>");
    return key;
  });
  if (keys.length === 0) throw new S3Error("MalformedXML", "<Delete> lists no <Object>");
  if (keys.length > 1000) throw new S3Error("MalformedXML", "<Delete> may list at most 1000 objects");
  return { keys, quiet: elementText(xml, "Quiet")?.trim() === "true" };
}

/** CompleteMultipartUpload's body: the parts in the order given. Pure. */
export function parseCompleteParts(xml: string): Array<{ partNumber: number; etag: string }> {
  if (!/<CompleteMultipartUpload[\s>]/.test(xml)) throw new S3Error("MalformedXML", "The body must be a <CompleteMultipartUpload> document");
  const parts = elements(xml, "Part").map((p) => {
    const number = elementText(p, "PartNumber")?.trim() ?? "";
    const etag = elementText(p, "ETag")?.trim();
    if (!/^\d{1,5}$/.test(number) || etag === undefined) throw new S3Error("MalformedXML", "Each <Part> needs a <PartNumber> and an <ETag>");
    return { partNumber: Number(number), etag };
  });
  if (parts.length === 0) throw new S3Error("MalformedXML", "<CompleteMultipartUpload> lists no <Part>");
  return parts;
}

const NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"';

/** A document `<root xmlns=...>body</root>`. Pure. */
export function xmlDocument(root: string, body: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root} ${NS}>${body}</${root}>`;
}

/** `<name>text</name>` for each defined field, in order. Pure. */
export function xmlFields(fields: Array<[string, string | number | boolean | undefined]>): string {
  return fields
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `<${k}>${xmlText(String(v))}</${k}>`)
    .join("");
}
