// Load-balanced endpoints beside what users would run instead: nginx and HAProxy (Debian's packages, started
// here on free ports) in front of the same plain Node server as svc's LB endpoint, same load client, alternating
// rounds (bench/peer-lb.mjs). Target: svc's cost within 1.1x of nginx's at every size. BENCH_ROUNDS sets the
// number of rounds (default 5).
import { LB_TARGET, measureLbPeers } from "./peer-lb.mjs";

export const title = `load-balanced proxy vs. nginx and HAProxy (target: within ${LB_TARGET}x of nginx)`;

export async function run() {
  const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
  const { rows } = await measureLbPeers({ rounds, onProgress: (line) => process.stderr.write(`  ${line}\n`) });
  return rows;
}
