// svc's error hierarchy. It is defined in the SDK package (`svc`), because user code catches the same classes
// the CLI throws and the SDK's job client raises; the CLI's modules import it from here.

export {
  ApiError,
  ExitCode,
  InternalError,
  SvcError,
  UnreachableError,
  UsageError,
  UserError,
  errorMessage,
  formatLocation,
  type Problem,
  type SourceLocation,
} from "svc/internal";
