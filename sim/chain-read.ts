/**
 * One consistent read of a chain for the simulator's checks (ChainView): the logs of its
 * generations and its inbox, as the store had them at one instant.
 */
import { DEFAULT_TOPIC } from "../src/runtime/inbox.ts";
import type { Envelope } from "../src/kernel/events.ts";
import type { Store } from "../src/store/spi.ts";
import { generationId, type ChainView } from "./invariants.ts";

/** Logs as last read: a log only grows, so one whose head has not moved is not read again. */
export type LogCache = Map<string, readonly Envelope[]>;

/**
 * One consistent read of the chain `chainId` (see ChainView): its generations' logs and its
 * inbox (unless `withInbox` is false: a child's chain is sent nothing), taken again until a
 * second look finds every head and the stream where the read found them (a double collect), so
 * the read shows the store as it was at one instant.
 */
export async function readChain(
  store: Store,
  chainId: string,
  known: number,
  cache: LogCache = new Map(),
  withInbox = true,
): Promise<ChainView> {
  const inbox = async () =>
    withInbox ? store.readMessages(chainId, DEFAULT_TOPIC, -1, Number.MAX_SAFE_INTEGER) : [];
  for (let probe = known + 2; ;) {
    const ids = Array.from({ length: probe + 1 }, (_, n) => generationId(chainId, n));
    const heads = await Promise.all(ids.map((id) => store.head(id)));
    const logs = await Promise.all(
      ids.map(async (id, n) => {
        const cached = cache.get(id);
        return cached?.length === (heads[n] ?? -1) + 1 ? cached : store.read(id);
      }),
    );
    const messages = await inbox();
    const again = await Promise.all(ids.map((id) => store.head(id)));
    const moved =
      again.some((h, n) => h !== heads[n] || h !== (logs[n]?.length ?? 0) - 1) ||
      (await inbox()).length !== messages.length;
    if (moved) continue;
    for (const [n, log] of logs.entries()) if (log.length > 0) cache.set(ids[n] ?? "", log);
    const end = logs.findIndex((log) => log.length === 0);
    if (end < 0) {
      probe *= 2;
      continue;
    }
    const view: ChainView = { chainId, logs: logs.slice(0, end), messages };
    const beyond = logs.findIndex((log, n) => n > end && log.length > 0);
    if (beyond > 0) view.beyond = beyond;
    return view;
  }
}
