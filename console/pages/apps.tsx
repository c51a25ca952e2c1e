// Apps and environments (`/v1/apps`): which build each environment runs, its endpoints, when it was deployed,
// and its recent releases with a rollback. Otherwise apps change through `svc deploy` / `svc env`.

import { useEffect, useState } from "preact/hooks";
import { loadAppEnvironments, type AppEnvironment } from "../endpoints-data.js";
import { Releases } from "../releases.js";
import { ProblemMessage, Time } from "../ui.js";

export function AppsPage() {
  const [environments, setEnvironments] = useState<AppEnvironment[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const load = () => loadAppEnvironments().then(setEnvironments, setProblem);
  useEffect(() => {
    void load();
  }, []);
  const apps = [...new Set((environments ?? []).map((e) => e.app))];
  return (
    <section aria-labelledby="apps-title">
      <h1 id="apps-title" tabIndex={-1}>
        Apps and environments
      </h1>
      <ProblemMessage error={problem} />
      {environments === null && !problem && <p>Loading…</p>}
      {environments !== null && apps.length === 0 && <p>No apps deployed yet: run `svc deploy` in a project.</p>}
      {apps.map((app) => (
        <section class="card" key={app} aria-labelledby={`app-${app}`}>
          <h2 id={`app-${app}`}>{app}</h2>
          {environments!
            .filter((e) => e.app === app)
            .map((e) => (
              <div class="environment" key={e.env} data-environment={`${app}/${e.env}`}>
                <h3>Environment {e.env}</h3>
                <dl class="facts">
                  <dt>Build</dt>
                  <dd class="mono">{e.build ? e.build.slice(0, 12) : "none yet"}</dd>
                  <dt>Deployed</dt>
                  <dd>
                    <Time t={e.activatedAt} never="never" />
                  </dd>
                  <dt>Created</dt>
                  <dd>
                    <Time t={e.createdAt} />
                  </dd>
                </dl>
                {e.endpoints.length === 0 ? (
                  <p class="muted">No endpoints.</p>
                ) : (
                  <ul>
                    {e.endpoints.map((ep) => (
                      <li key={ep.id}>
                        <a href={`#/endpoints/${encodeURIComponent(ep.id)}`}>{ep.name}</a>{" "}
                        <span class="muted">
                          ({ep.type === "lb" ? "load-balanced" : "queue"}, workers {ep.workersMin}–{ep.workersMax})
                        </span>
                      </li>
                    ))}
                  </ul>
                )}
                {/* A rollback changes the build and endpoints shown above: reload them when it lands. */}
                <Releases app={app} env={e.env} level={4} onBuildChange={() => void load()} />
              </div>
            ))}
        </section>
      ))}
    </section>
  );
}
