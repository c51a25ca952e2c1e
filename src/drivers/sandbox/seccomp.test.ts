import { describe, expect, it } from "vitest";
import {
  auditArch,
  CLONE_NAMESPACE_FLAGS,
  deniedNumber,
  encodeProgram,
  ENOSYS,
  EPERM,
  evaluate,
  SECCOMP_RET_ALLOW,
  seccompArch,
  seccompProgram,
  type SeccompArch,
} from "./seccomp.js";

const ERRNO = (e: number) => 0x00050000 | e;
const CLONE_THREAD_FLAGS = 0x003d0f00; // what glibc's pthread_create passes: no namespace flag

describe("seccompProgram", () => {
  for (const arch of ["x64", "arm64"] as SeccompArch[]) {
    const program = seccompProgram(arch);
    const run = (nr: number, args?: number[], a = auditArch(arch)) => evaluate(program, { nr, arch: a, args });

    it(`${arch}: denies the dangerous calls with EPERM and allows the rest`, () => {
      for (const name of [
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "kexec_load",
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "mount",
        "umount2",
        "pivot_root",
        "unshare",
        "setns",
      ]) {
        expect(run(deniedNumber(name, arch)!), name).toBe(ERRNO(EPERM));
      }
      // read, write, openat, mmap, futex, epoll_wait...: what Node does all day
      const allowed = arch === "x64" ? [0, 1, 257, 9, 202, 232, 59, 61] : [63, 64, 56, 222, 98, 22, 221, 260];
      for (const nr of allowed) expect(run(nr), String(nr)).toBe(SECCOMP_RET_ALLOW);
    });

    it(`${arch}: clone makes threads and processes but no namespaces; clone3 says ENOSYS (libc falls back)`, () => {
      const clone = arch === "x64" ? 56 : 220;
      expect(run(clone, [CLONE_THREAD_FLAGS])).toBe(SECCOMP_RET_ALLOW);
      expect(run(clone, [0x11])).toBe(SECCOMP_RET_ALLOW); // fork(): SIGCHLD
      expect(run(clone, [0x10000000 | 0x11])).toBe(ERRNO(EPERM)); // CLONE_NEWUSER
      expect(run(clone, [0x20000000])).toBe(ERRNO(EPERM)); // CLONE_NEWPID
      expect(run(clone, [CLONE_NAMESPACE_FLAGS])).toBe(ERRNO(EPERM));
      expect(run(435)).toBe(ERRNO(ENOSYS));
    });

    it(`${arch}: refuses every call of another architecture`, () => {
      expect(run(0, [], arch === "x64" ? 0x40000003 /* i386 */ : auditArch("x64"))).toBe(ERRNO(EPERM));
    });
  }

  it("x64: refuses the x32 ABI", () => {
    expect(evaluate(seccompProgram("x64"), { nr: 0x40000000 | 0, arch: auditArch("x64") })).toBe(ERRNO(EPERM));
  });

  it("encodes struct sock_filter little-endian, 8 bytes an instruction", () => {
    const program = seccompProgram("x64");
    const bytes = encodeProgram(program);
    expect(bytes.length).toBe(program.length * 8);
    // ld [4] (the arch)
    expect([...bytes.subarray(0, 8)]).toEqual([0x20, 0, 0, 0, 4, 0, 0, 0]);
    // the last: ret ALLOW
    expect(bytes.readUInt32LE(bytes.length - 4)).toBe(SECCOMP_RET_ALLOW);
    // every jump stays inside the program (the kernel refuses a program that does not)
    program.forEach((ins, pc) => {
      if ((ins.code & 0x07) === 0x05) expect(pc + 1 + Math.max(ins.jt, ins.jf)).toBeLessThan(program.length);
    });
  });

  it("knows the arches it can filter", () => {
    expect(seccompArch("x64")).toBe("x64");
    expect(seccompArch("arm64")).toBe("arm64");
    expect(seccompArch("s390x")).toBeUndefined();
  });
});
