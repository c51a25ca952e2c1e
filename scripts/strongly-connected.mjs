// Tarjan's strongly connected components over a graph given as its nodes and an edges function: every component
// of more than one node is a cycle. Shared by the cycle check (compiled modules) and the layer check (sources).

/** The components of more than one node, each as the list of its nodes. Pure. */
export function cyclesOf(nodes, edgesOf) {
  let index = 0;
  const stack = [];
  const info = new Map();
  const cycles = [];
  function visit(v) {
    info.set(v, { index, low: index, onStack: true });
    index++;
    stack.push(v);
    for (const w of edgesOf(v)) {
      if (!info.has(w)) {
        visit(w);
        info.get(v).low = Math.min(info.get(v).low, info.get(w).low);
      } else if (info.get(w).onStack) info.get(v).low = Math.min(info.get(v).low, info.get(w).index);
    }
    if (info.get(v).low === info.get(v).index) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        info.get(w).onStack = false;
        component.push(w);
      } while (w !== v);
      if (component.length > 1) cycles.push(component);
    }
  }
  for (const v of nodes) if (!info.has(v)) visit(v);
  return cycles;
}
