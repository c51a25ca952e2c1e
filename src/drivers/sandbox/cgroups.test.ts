import { describe, expect, it } from "vitest";
import { cgroupHost, limitWrites } from "./cgroups.js";

const MOUNTINFO = [
  "35 24 0:30 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755",
  "36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw",
  "40 35 0:35 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory",
  "41 35 0:36 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids",
  "42 35 0:37 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct",
].join("\n");

describe("cgroupHost", () => {
  it("finds this process's directory in each v1 hierarchy and in the unified one", () => {
    const host = cgroupHost("12:pids:/svc.service\n4:memory:/svc.service\n3:cpu,cpuacct:/\n0::/system.slice/svc.service\n", MOUNTINFO);
    expect(host).toEqual({
      v2: "/sys/fs/cgroup/unified/system.slice/svc.service",
      v1: { memory: "/sys/fs/cgroup/memory/svc.service", pids: "/sys/fs/cgroup/pids/svc.service", cpu: "/sys/fs/cgroup/cpu,cpuacct" },
    });
  });

  it("maps a path through a mount of a subtree (a container's cgroup namespace), and skips what it does not show", () => {
    const mountinfo = "50 35 0:35 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory";
    expect(cgroupHost("4:memory:/docker/abc/inner\n", mountinfo).v1.memory).toBe("/sys/fs/cgroup/memory/inner");
    expect(cgroupHost("4:memory:/elsewhere\n", mountinfo).v1.memory).toBeUndefined();
  });
});

describe("limitWrites", () => {
  it("v2: memory.max (no swap), pids.max, cpu.max as quota and period", () => {
    expect(limitWrites(2, { memoryBytes: 1 << 30, pids: 256, cpus: 1.5 })).toEqual([
      { controller: "memory", file: "memory.max", value: String(1 << 30) },
      { controller: "memory", file: "memory.swap.max", value: "0", optional: true },
      { controller: "pids", file: "pids.max", value: "256" },
      { controller: "cpu", file: "cpu.max", value: "150000 100000" },
    ]);
  });

  it("v1: memory and memory+swap limits, pids.max, CFS quota; nothing for what is not limited", () => {
    expect(limitWrites(1, { memoryBytes: 512, cpus: 2 }).map((w) => `${w.file}=${w.value}`)).toEqual([
      "memory.limit_in_bytes=512",
      "memory.memsw.limit_in_bytes=512",
      "cpu.cfs_period_us=100000",
      "cpu.cfs_quota_us=200000",
    ]);
    expect(limitWrites(1, {})).toEqual([]);
  });
});
