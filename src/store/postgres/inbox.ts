/**
 * The chain inbox on PostgreSQL (S12). A chain's next sequence number is a row of its own
 * (`inbox_heads`), taken and advanced by one upsert that locks it: concurrent appends to one chain,
 * from any process, get distinct, dense numbers, and the message, the counter and the fleet's
 * wake (S18) commit in one statement.
 */
import type pg from "pg";
import { InvariantViolation } from "../../kernel/errors.ts";
import { jsonText } from "../../kernel/json.ts";
import type { InboxStore } from "../spi.ts";
import { run, statement, type Tables } from "./db.ts";
import { wakeText } from "./wakes.ts";
import { messageOf, type MessageRow } from "../rows.ts";

export function postgresInbox(pool: pg.Pool, t: Tables, channel: string): InboxStore {
  const s = {
    append: statement(
      "append_message",
      `WITH next AS (
         INSERT INTO ${t.inboxHeads} AS h (chain_id, next_seq) VALUES ($1, 1)
         ON CONFLICT (chain_id) DO UPDATE SET next_seq = h.next_seq + 1
         RETURNING next_seq - 1 AS seq
       ), appended AS (
         INSERT INTO ${t.inbox} (chain_id, seq, topic, key, payload, at)
         SELECT $1, seq, $2, $3, $4, $5 FROM next
         RETURNING seq
       )
       SELECT seq, CASE WHEN $7::text IS NULL THEN NULL ELSE pg_notify($6, $7) END AS notified
       FROM appended`,
    ),
    read: statement(
      "read_messages",
      `SELECT seq, topic, key, payload, at FROM ${t.inbox}
       WHERE chain_id = $1 AND topic = $2 AND seq > $3 ORDER BY seq LIMIT $4`,
    ),
  };

  return {
    async appendMessage(chainId, m) {
      const wake = wakeText({ kind: "message", chainId }) ?? null;
      const { rows } = await run<{ seq: number }>(
        pool,
        s.append([chainId, m.topic, m.key, jsonText(m.payload), m.atMs, channel, wake]),
      );
      const seq = rows[0]?.seq;
      if (seq === undefined)
        throw new InvariantViolation(`inbox append to ${chainId} returned no sequence number`);
      return seq;
    },

    async readMessages(chainId, topic, afterSeq, limit) {
      const { rows } = await run<MessageRow>(
        pool,
        s.read([chainId, topic, afterSeq, Math.max(0, Math.floor(limit))]),
      );
      return rows.map((r) => messageOf(chainId, r));
    },
  };
}
