// S3's error answers: an XML document with a code clients branch on (NoSuchKey, SignatureDoesNotMatch, ...), the
// HTTP status S3 gives that code, and a message for people. Every failure of the S3 API is one of these.

/** The codes this API answers, with S3's status for each. */
export const S3_STATUS = {
  AccessDenied: 403,
  AuthorizationHeaderMalformed: 400,
  BadDigest: 400,
  EntityTooLarge: 400,
  EntityTooSmall: 400,
  IncompleteBody: 400,
  InternalError: 500,
  InvalidAccessKeyId: 403,
  InvalidArgument: 400,
  InvalidBucketName: 400,
  InvalidPart: 400,
  InvalidPolicyDocument: 400,
  InvalidPartOrder: 400,
  InvalidRange: 416,
  InvalidRequest: 400,
  MalformedPOSTRequest: 400,
  MalformedXML: 400,
  MethodNotAllowed: 405,
  MissingContentLength: 411,
  NoSuchBucket: 404,
  NoSuchKey: 404,
  NoSuchUpload: 404,
  NotImplemented: 501,
  RequestTimeTooSkewed: 403,
  SignatureDoesNotMatch: 403,
  XAmzContentSHA256Mismatch: 400,
} as const;

export type S3Code = keyof typeof S3_STATUS;

export class S3Error extends Error {
  readonly status: number;
  constructor(
    readonly code: S3Code,
    message: string,
    /** More elements of the error document (e.g. BucketName, Key), and headers of the answer. */
    readonly extra: { fields?: Record<string, string>; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.status = S3_STATUS[code];
  }
}

/** Text escaped for an XML element. Pure. */
export function xmlText(value: string): string {
  return value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");
}

/** An S3 error document. Pure. */
export function errorXml(err: S3Error, resource: string, requestId: string): string {
  const fields = Object.entries(err.extra.fields ?? {})
    .map(([k, v]) => `<${k}>${xmlText(v)}</${k}>`)
    .join("");
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${err.code}</Code><Message>${xmlText(err.message)}</Message>${fields}<Resource>${xmlText(resource)}</Resource><RequestId>${requestId}</RequestId></Error>`;
}
