/**
 * The chain inbox on SQLite (S12): one row per message, keyed by chain and sequence. An append
 * takes the next sequence number and inserts in one `BEGIN IMMEDIATE` transaction, so two
 * processes appending to one chain get distinct, dense numbers.
 */
import type Database from "better-sqlite3";
import { jsonText } from "../../kernel/json.ts";
import type { InboxMessage, InboxStore } from "../spi.ts";
import { messageOf, type MessageRow } from "../rows.ts";

export function sqliteInbox(db: Database.Database): InboxStore {
  const next = db
    .prepare<[string], number>("SELECT COALESCE(MAX(seq), -1) + 1 FROM inbox WHERE chain_id = ?")
    .pluck();
  const insert = db.prepare(
    "INSERT INTO inbox (chain_id, seq, topic, key, payload, at) VALUES (?, ?, ?, ?, ?, ?)",
  );
  const read = db.prepare<[string, string, number, number], MessageRow>(
    `SELECT seq, topic, key, payload, at FROM inbox
     WHERE chain_id = ? AND topic = ? AND seq > ? ORDER BY seq LIMIT ?`,
  );
  const append = db.transaction((chainId: string, m: Omit<InboxMessage, "chainId" | "seq">) => {
    const seq = next.get(chainId) ?? 0;
    insert.run(chainId, seq, m.topic, m.key, jsonText(m.payload), m.atMs);
    return seq;
  });
  return {
    async appendMessage(chainId, message) {
      return append.immediate(chainId, message);
    },
    async readMessages(chainId, topic, afterSeq, limit) {
      return read.all(chainId, topic, afterSeq, limit).map((r) => messageOf(chainId, r));
    },
  };
}
