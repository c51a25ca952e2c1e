// An environment's recent releases with a rollback: shown on an endpoint's page (its environment) and on the
// Apps page (each environment). One component so both pages follow the same release rule as `svc rollback`.

import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "./api.js";
import { ListTable, Notice, ProblemMessage, Time, useConfirm } from "./ui.js";

interface Release {
  id: string;
  buildId: string;
  kind: "deploy" | "rollback";
  state: string;
  startedAt: number;
  finishedAt: number | null;
  error: { endpoint: string; message: string } | null;
}

/**
 * The environment's recent releases, newest first, the running one marked. A build that went live and is not the
 * one running can be rolled back to: plan, confirm what it removes, activate (as `svc rollback` does).
 * `onBuildChange` hears when the environment's running build changes, so a page showing it can follow.
 */
export function Releases({ app, env, level = 2, onBuildChange }: { app: string; env: string; level?: 2 | 4; onBuildChange?: (build: string | null) => void }) {
  const base = `/v1/apps/${encodeURIComponent(app)}/environments/${encodeURIComponent(env)}`;
  const [releases, setReleases] = useState<Release[] | null>(null);
  const [current, setCurrent] = useState<string | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [dialog, confirm] = useConfirm();
  // The running build of the last load: undefined before the first, so the first load is no change.
  const lastBuild = useRef<string | null | undefined>(undefined);
  const load = async () => {
    try {
      const [r, e] = await Promise.all([api<{ releases: Release[] }>(`${base}/releases`), api<{ build: string | null }>(base)]);
      setReleases(r.releases);
      setCurrent(e.build);
      if (lastBuild.current !== undefined && lastBuild.current !== e.build) onBuildChange?.(e.build);
      lastBuild.current = e.build;
    } catch (err) {
      setProblem(err);
    }
  };
  useEffect(() => {
    lastBuild.current = undefined;
    void load();
  }, [base]);
  // While a release starts, follow it.
  useEffect(() => {
    if (!releases?.some((r) => r.state === "starting")) return;
    const timer = setTimeout(() => void load(), 1000);
    return () => clearTimeout(timer);
  }, [releases]);
  const rollback = async (build: string) => {
    setProblem(null);
    setDone(null);
    try {
      const plan = await api<{ remove: Array<{ name: string }> }>(`${base}/plan`, { body: { build } });
      const removes = plan.remove.map((r) => r.name);
      confirm({
        title: `Roll ${app}/${env} back to build ${build.slice(0, 12)}?`,
        body: (
          <>
            <p>The endpoints it changes start new workers on that build first and switch once they are up; jobs keep running meanwhile.</p>
            {removes.length > 0 && <p class="notice warn">It removes {removes.join(", ")}: endpoints that build does not have.</p>}
          </>
        ),
        confirmLabel: "Roll back",
        action: async () => {
          setBusy(true);
          try {
            const answer = await api<{ release?: Release }>(`${base}/activate`, { body: { build, confirmRemove: removes, rollback: true, wait: false } });
            setDone(`Rolling back to ${build.slice(0, 12)}: ${answer.release?.state ?? "started"}.`);
          } catch (err) {
            setProblem(err);
          } finally {
            setBusy(false);
            void load();
          }
        },
      });
    } catch (err) {
      setProblem(err);
    }
  };
  const titleId = `releases-${app}-${env}`;
  const Heading = level === 2 ? "h2" : "h4";
  return (
    <section class={level === 2 ? "card" : "releases"} aria-labelledby={titleId} data-releases={`${app}/${env}`}>
      {dialog}
      <Heading id={titleId}>
        Releases of {app}/{env}
      </Heading>
      <ProblemMessage error={problem} />
      <Notice text={done} />
      {releases === null ? (
        !problem && <p>Loading…</p>
      ) : releases.length === 0 ? (
        <p class="muted">No releases yet.</p>
      ) : (
        <ListTable label={`Releases of ${app}/${env}`} columns={["Build", "Kind", "State", "Started"]} action="Action">
          {releases.map((r) => {
            const running = r.buildId === current && r.state === "live";
            return (
              <tr key={r.id} data-release={r.id} data-build={r.buildId} data-running={running ? "true" : undefined}>
                <th scope="row">
                  <span class="mono nowrap">{r.buildId.slice(0, 12)}</span>
                </th>
                <td>{r.kind}</td>
                <td>
                  {/* One badge a release: the one the environment runs says so; earlier ones say what became of them. */}
                  <span class={`badge release-${running ? "running" : r.state}`}>{running ? "running" : r.state}</span>
                  {r.error && (
                    <p class="error-text">
                      {r.error.endpoint}: {r.error.message.split("\n")[0]}
                    </p>
                  )}
                </td>
                <td>
                  <Time t={r.startedAt} />
                </td>
                <td>
                  {(r.state === "live" || r.state === "replaced") && r.buildId !== current && (
                    <button
                      class="secondary small"
                      disabled={busy}
                      onClick={() => void rollback(r.buildId)}
                      aria-label={`Roll back to build ${r.buildId.slice(0, 12)}`}
                    >
                      Roll back
                    </button>
                  )}
                </td>
              </tr>
            );
          })}
        </ListTable>
      )}
    </section>
  );
}
