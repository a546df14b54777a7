/**
 * The dashboard's access token (issue 22 item 5). The dashboard decrypts what the codec sealed
 * and can cancel, resume (approve a gated `suspend`) and message executions, so reaching its
 * port is not enough: every request carries the token.
 *
 * Invariants (tests cite A1..A5):
 * A1. Every request is refused 401 unless it carries the token, whatever its path and method
 *     (the page, its assets, the JSON API, live streams, the writes, and paths that do not
 *     exist), from the loopback too: the token rides in the cookie the sign-in URL sets, or in
 *     `Authorization: Bearer <token>`.
 * A2. A presented token is compared with the server's in constant time (the SHA-256 digests of
 *     both, with timingSafeEqual), so the time of a refusal says nothing of how close a guess was.
 * A3. The sign-in URL `/auth?token=<token>` sets the token as an HttpOnly, SameSite=Strict
 *     cookie named after the server's port and answers 303 to `/`, so the token leaves the
 *     address bar (the URL's hash is kept by the browser); a wrong token is 401 and sets nothing.
 * A4. When none is given, the token is 32 random bytes (base64url), new each time the server
 *     starts; a given one (the `token` option, `--token-file`, `LOOM_UI_TOKEN_FILE`) must be
 *     MIN_TOKEN_LENGTH to 256 URL-safe characters, or the server refuses to start.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { InvalidInputError } from "../kernel/errors.ts";
import { HttpRefusal } from "./http.ts";

/** A4: the shortest token accepted from a caller. */
export const MIN_TOKEN_LENGTH = 32;
const TOKEN_TEXT = /^[A-Za-z0-9._~-]+$/;
const MAX_TOKEN_LENGTH = 256;

/** A3: the path of the sign-in URL. */
export const SIGN_IN_PATH = "/auth";

/** A4: a fresh random token. */
export function newToken(): string {
  return randomBytes(32).toString("base64url");
}

/** A4: `token` if it is one the server accepts; else an InvalidInputError naming `where`. */
export function checkToken(token: string, where: string): string {
  if (
    typeof token !== "string" ||
    token.length < MIN_TOKEN_LENGTH ||
    token.length > MAX_TOKEN_LENGTH ||
    !TOKEN_TEXT.test(token)
  ) {
    throw new InvalidInputError(
      `the dashboard token from ${where} must be ${MIN_TOKEN_LENGTH} to ${MAX_TOKEN_LENGTH} characters of A-Z, a-z, 0-9, '.', '_', '~' or '-'`,
    );
  }
  return token;
}

/** A4: the token in a file (surrounding white space, such as a final newline, dropped). */
export async function readTokenFile(path: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new InvalidInputError(`cannot read the dashboard token file ${path}: ${why}`);
  }
  return checkToken(text.trim(), `the file ${path}`);
}

const digest = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest();

/** The server's side of A1..A3: which requests carry the token, and the cookie that carries it. */
export class TokenGate {
  private readonly expected: Buffer;
  readonly cookieName: string;

  constructor(
    private readonly token: string,
    port: number,
  ) {
    this.expected = digest(token);
    // Cookies are not kept apart by port: two dashboards on one host need two names.
    this.cookieName = `loom_ui_${port}`;
  }

  /** A2 */
  private matches(presented: string | undefined): boolean {
    if (presented === undefined) return false;
    return timingSafeEqual(digest(presented), this.expected);
  }

  /** A1, A3: throws the 401 unless the request carries the token (`query`: the sign-in URL's). */
  check(req: IncomingMessage, query: string | undefined): void {
    const bearer = /^Bearer (\S+)$/i.exec(req.headers.authorization ?? "")?.[1];
    const ok = [query, bearer, this.cookieOf(req)].some((t) => this.matches(t));
    if (!ok) {
      throw new HttpRefusal(
        401,
        "LOOM_UNAUTHENTICATED",
        "this dashboard needs its token: open the sign-in URL `loom ui` printed " +
          `(${SIGN_IN_PATH}?token=...), or send Authorization: Bearer <token>`,
      );
    }
  }

  /** A3: the Set-Cookie value that signs a browser in. */
  cookie(): string {
    return `${this.cookieName}=${this.token}; Path=/; HttpOnly; SameSite=Strict`;
  }

  private cookieOf(req: IncomingMessage): string | undefined {
    for (const part of (req.headers.cookie ?? "").split(";")) {
      const at = part.indexOf("=");
      if (at > 0 && part.slice(0, at).trim() === this.cookieName) return part.slice(at + 1).trim();
    }
    return undefined;
  }
}
