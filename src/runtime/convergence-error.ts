import type { ConvergeErrorCode } from './error-codes.js';

/** The base of every error converge throws on purpose; `code` is one of the rows of ERROR_CODES. */
export class ConvergeError extends Error {
  readonly code: ConvergeErrorCode;
  constructor(code: ConvergeErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}
