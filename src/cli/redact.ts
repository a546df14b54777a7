/**
 * Keeps passwords out of what the CLI prints: a URL's password (`postgres://user:pw@host/db`) is
 * written `***` in every line a command prints, hints that name `--pg URL` included (R1).
 */

/** `scheme://user:password@` up to the password's end: the password is the second group. */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/?#@]*):([^\s/?#@]*)@/gi;

/** `text` with every URL's password replaced by `***` (R1). */
export function redactPasswords(text: string): string {
  return text.replace(URL_PASSWORD, "$1:***@");
}
