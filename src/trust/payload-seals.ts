/**
 * Sealing and opening payloads with the payload codec or a data subject's key: the cryptography of
 * the sealing store (sealed-store.ts V2, V3, V7, V8), for events and for sealed values
 * (sealed-values.ts).
 *
 * - V2: a payload of a subject's execution is sealed with the subject's own key (AES-GCM, key id
 *   `subject:<id>`), whatever the codec; any other with the codec.
 * - V3: SUBJECT_ERASED is never sealed with a subject's key.
 * - V7: a payload sealed with a destroyed subject key opens as `{ "$erased": <subject> }`, and an
 *   erased start keeps the identity recorded in its meta.
 * - V8: a value escaped under the `plain` codec opens as itself.
 * A payload sealed with a codec this runtime does not have is refused (CodecKeyError).
 */
import type { Envelope, EnvelopeMeta } from "../kernel/events.ts";
import { CodecKeyError } from "../kernel/errors.ts";
import { isPlainObject, jsonText, type Json } from "../kernel/json.ts";
import { AES_GCM, aesGcmOpen, aesGcmSeal, type PayloadCodec } from "./codec.ts";
import { identityOf, eventAad, PLAIN, type SealedValue } from "./sealed-values.ts";
import { subjectKeyId, subjectOfKeyId, type SubjectKeys } from "./subject-keys.ts";

export class PayloadSeals {
  constructor(
    private readonly codec: PayloadCodec | undefined,
    private readonly keys: SubjectKeys,
  ) {}

  async sealEvent(e: Envelope, subject: string | undefined): Promise<Envelope> {
    const bySubject = subject !== undefined && e.kind !== "SUBJECT_ERASED"; // V3
    if (!bySubject && !this.codec) return e;
    const plain = Buffer.from(jsonText(e.payload), "utf8");
    const aad = eventAad(e);
    let codec: string;
    let keyId: string;
    let sealed: Uint8Array;
    if (bySubject) {
      const key = await this.keys.mustHave(subject);
      codec = AES_GCM;
      keyId = subjectKeyId(subject);
      sealed = aesGcmSeal(key, plain, aad);
    } else {
      const c = this.codec as PayloadCodec;
      const out = await c.seal(plain, aad);
      codec = c.name;
      keyId = out.keyId;
      sealed = out.sealed;
    }
    const meta: EnvelopeMeta = { ...e.meta, codec, keyId };
    if (bySubject && e.kind === "EXECUTION_STARTED") meta.identity = identityOf(e.payload, subject);
    const bytes = Buffer.isBuffer(sealed) ? sealed : Buffer.from(sealed);
    return { ...e, payload: bytes.toString("base64"), meta };
  }

  async openEvent(e: Envelope): Promise<Envelope> {
    const meta: EnvelopeMeta = { ...e.meta };
    const codec = meta.codec;
    const keyId = meta.keyId;
    delete meta.codec;
    delete meta.keyId;
    delete meta.prev;
    delete meta.hash;
    delete meta.identity;
    const out: Envelope = { ...e, meta };
    if (Object.keys(meta).length === 0) delete out.meta;
    if (typeof codec !== "string" || typeof keyId !== "string" || typeof e.payload !== "string") {
      return out;
    }
    out.payload = await this.openBytes(Buffer.from(e.payload, "base64"), codec, keyId, eventAad(e));
    const identity = e.meta?.identity;
    if (isPlainObject(out.payload) && "$erased" in out.payload && isPlainObject(identity)) {
      out.payload = { ...identity, ...out.payload }; // V7
    }
    return out;
  }

  async sealValue(text: string, subject: string | undefined, aad: string): Promise<SealedValue> {
    const plain = Buffer.from(text, "utf8");
    if (subject !== undefined) {
      const key = await this.keys.mustHave(subject);
      const data = aesGcmSeal(key, plain, aad).toString("base64");
      return { $sealed: { codec: AES_GCM, keyId: subjectKeyId(subject), data } };
    }
    const c = this.codec as PayloadCodec;
    const out = await c.seal(plain, aad);
    const data = Buffer.from(out.sealed).toString("base64");
    return { $sealed: { codec: c.name, keyId: out.keyId, data } };
  }

  async openValue(v: SealedValue, where: string): Promise<Json> {
    const { codec, keyId, data } = v.$sealed;
    const bytes = Buffer.from(data, "base64");
    if (codec === PLAIN) return JSON.parse(bytes.toString("utf8")) as Json; // V8
    return this.openBytes(bytes, codec, keyId, where);
  }

  private async openBytes(
    sealed: Buffer,
    codec: string,
    keyId: string,
    aad: string,
  ): Promise<Json> {
    let plain: Uint8Array;
    const subject = subjectOfKeyId(keyId);
    if (subject !== undefined) {
      const key = await this.keys.get(subject, false);
      if (!key) return { $erased: subject }; // V7
      plain = aesGcmOpen(key, sealed, aad);
    } else {
      if (!this.codec || this.codec.name !== codec) {
        throw new CodecKeyError(
          `a payload is sealed with codec "${codec}" (key "${keyId}"), and this runtime has ${this.codec ? `codec "${this.codec.name}"` : "no codec"}`,
          { codec, keyId },
        );
      }
      plain = await this.codec.open(sealed, keyId, aad);
    }
    return JSON.parse(Buffer.from(plain).toString("utf8")) as Json;
  }
}
