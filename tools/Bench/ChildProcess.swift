// Running a program as a child process and taking its own resource usage from `wait4`, for `--scale`.

#if canImport(Glibc)
    import Glibc
#endif

/// One finished child process: how it ended, its wall time, its CPU time and its own peak resident set.
struct ChildRun {
    /// The exit status when it exited; nil when a signal ended it.
    var exitStatus: Int32?
    /// The signal that ended it, if one did.
    var signal: Int32?
    /// Wall time from spawn to reaped.
    var seconds: Double
    /// User + system CPU time of the child.
    var cpuSeconds: Double
    /// `ru_maxrss` of the child from `wait4`, in bytes.
    ///
    /// On Linux it is at least the spawner's own peak RSS: `posix_spawn` runs the child on the parent's
    /// address space until `exec`, and `exec` folds that address space's high-water mark into the child's
    /// figure. The bench therefore keeps itself small and measures that floor (`floorRSS`).
    var peakRSSBytes: Int
    /// Minor page faults of the child (`ru_minflt`): pages mapped without I/O, a memory map's included.
    var minorFaults: Int = 0

    /// True when it exited with status 0.
    var succeeded: Bool { exitStatus == 0 }

    /// "exit 1" or "killed by signal 9", for reports.
    var ending: String {
        if let signal { return "killed by signal \(signal)" }
        return "exit \(exitStatus ?? -1)"
    }
}

/// Spawns programs with `posix_spawn` and reaps them with `wait4`, so each child's usage is its own.
enum ChildProcess {
    /// Runs `executable` with `arguments`, stdin from /dev/null, stdout and stderr to the given files, this
    /// process's environment plus `environment` (`NAME=value` entries), and waits for it.
    static func run(
        _ executable: String, _ arguments: [String], stdout: String, stderr: String, environment: [String] = []
    ) throws -> ChildRun {
        let (pid, start) = try start(
            executable, arguments, stdout: stdout, stderr: stderr, environment: environment)
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else {
                throw BenchError("wait4 for \(executable): \(String(cString: strerror(errno)))")
            }
        }
        let seconds = now() - start
        // The <sys/wait.h> macros are not imported: a signal in the low 7 bits, else the exit status above.
        let signal = status & 0x7f
        return ChildRun(
            exitStatus: signal == 0 ? (status >> 8) & 0xff : nil,
            signal: signal == 0 ? nil : signal,
            seconds: seconds,
            cpuSeconds: Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
                + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6,
            peakRSSBytes: Int(usage.ru_maxrss) * 1024  // KiB on Linux
        )
    }

    /// The directory of the running executable (`/proc/self/exe`, else `CommandLine.arguments[0]`'s).
    static func ownDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let path =
            n > 0
            ? String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return String(path[..<slash])
    }

    /// `name` next to the running executable, or an error saying how to build it.
    static func sibling(_ name: String) throws -> String {
        let path = ownDirectory() + "/" + name
        guard access(path, X_OK) == 0 else {
            throw BenchError(
                "\(path) is missing: build it first (`swift build -c release --product \(name)`, same configuration)")
        }
        return path
    }
}

/// A child started by `ChildProcess.spawn` and not yet reaped (for the long-running `teamlog serve`
/// partitions of `--nats`).
struct RunningChild {
    let pid: pid_t
    let executable: String
    /// When it was spawned (`now()`).
    let started: Double

    /// User + system CPU seconds so far, from `/proc/<pid>/stat` (utime and stime, fields 14 and 15);
    /// nil when it cannot be read.
    var cpuSeconds: Double? { procCPUSeconds(pid) }

    /// Sends `signal` and reaps the child; its wall time and usage as a `ChildRun`.
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM) -> ChildRun? {
        kill(pid, signal)
        return wait()
    }

    /// Waits for the child to exit and reaps it; its wall time and usage as a `ChildRun`.
    func wait() -> ChildRun? {
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 {
            guard errno == EINTR else { return nil }
        }
        let code = status & 0x7f
        return ChildRun(
            exitStatus: code == 0 ? (status >> 8) & 0xff : nil, signal: code == 0 ? nil : code,
            seconds: now() - started,
            cpuSeconds: Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
                + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6,
            peakRSSBytes: Int(usage.ru_maxrss) * 1024, minorFaults: Int(usage.ru_minflt))
    }
}

/// User + system CPU seconds of process `pid` from `/proc/<pid>/stat`, or nil.
func procCPUSeconds(_ pid: pid_t) -> Double? {
    procStat("/proc/\(pid)/stat").map { $0.seconds }
}

/// The command name and user + system CPU seconds of a `/proc/…/stat` file (a process's or a thread's).
private func procStat(_ path: String) -> (name: String, seconds: Double)? {
    guard let f = fopen(path, "r") else { return nil }
    defer { fclose(f) }
    var buffer = [CChar](repeating: 0, count: 4096)
    guard fgets(&buffer, Int32(buffer.count), f) != nil else { return nil }
    let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
    guard let close = text.lastIndex(of: ")") else { return nil }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // fields[0] is field 3 (state), so utime (14) and stime (15) are fields[11] and fields[12].
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    let name = text.firstIndex(of: "(").map { String(text[text.index(after: $0)..<close]) } ?? "?"
    return (name, (user + system) / Double(sysconf(Int32(_SC_CLK_TCK))))
}

/// CPU seconds per thread of a running process (`/proc/<pid>/task/<tid>/stat`, at the kernel's tick:
/// 10 ms), so a run can say which thread used the cores in one phase of it.
struct ThreadCPU: Sendable {
    /// Thread id → its name and CPU seconds so far.
    var threads: [Int: (name: String, seconds: Double)] = [:]

    /// The threads of `pid` now; empty when `/proc` cannot be read.
    static func read(_ pid: pid_t) -> ThreadCPU {
        var result = ThreadCPU()
        guard let dir = opendir("/proc/\(pid)/task") else { return result }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let tid = Int(name), let stat = procStat("/proc/\(pid)/task/\(tid)/stat") else { continue }
            result.threads[tid] = stat
        }
        return result
    }

    /// Both readings, each thread at its later one (a thread that ended between them keeps the earlier).
    func merging(_ other: ThreadCPU) -> ThreadCPU {
        var merged = self
        for (tid, reading) in other.threads where reading.seconds > (merged.threads[tid]?.seconds ?? -1) {
            merged.threads[tid] = reading
        }
        return merged
    }

    /// CPU seconds each thread name used since `earlier` (threads of one name summed; a thread started
    /// since counts from zero), largest first.
    func since(_ earlier: ThreadCPU) -> [(name: String, seconds: Double)] {
        var byName: [String: Double] = [:]
        for (tid, now) in threads {
            byName[now.name, default: 0] += now.seconds - (earlier.threads[tid]?.seconds ?? 0)
        }
        return byName.map { ($0.key, $0.value) }.sorted { $0.1 > $1.1 }
    }
}

extension ChildProcess {
    /// Starts `executable` with `arguments` (stdin /dev/null, stdout and stderr to the given files) and
    /// returns at once; `RunningChild.stop` ends and reaps it.
    static func spawn(_ executable: String, _ arguments: [String], stdout: String, stderr: String) throws
        -> RunningChild
    {
        let (pid, start) = try start(executable, arguments, stdout: stdout, stderr: stderr, environment: [])
        return RunningChild(pid: pid, executable: executable, started: start)
    }

    /// Starts `executable` with its stdin and stdout on pipes (stderr to a file) and returns at once: the
    /// child, the pipe's end that writes its stdin, and the one that reads its stdout. SIGPIPE is ignored
    /// from then on, so a child that exits early makes a write fail rather than end the bench.
    static func spawnPiped(_ executable: String, _ arguments: [String], stderr: String) throws
        -> (child: RunningChild, stdin: Int32, stdout: Int32)
    {
        signal(SIGPIPE, SIG_IGN)
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else {
            throw BenchError("pipe: \(String(cString: strerror(errno)))")
        }
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)  // dup2 clears close-on-exec on 0 and 1
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let started = now()
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(toChild[0])
        close(fromChild[1])
        guard spawned == 0 else {
            close(toChild[1])
            close(fromChild[0])
            throw BenchError("cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        return (RunningChild(pid: pid, executable: executable, started: started), toChild[1], fromChild[0])
    }

    /// Starts `executable` (stdin /dev/null, stdout and stderr to the given files, this process's
    /// environment plus `environment`): its pid and when it started.
    private static func start(
        _ executable: String, _ arguments: [String], stdout: String, stderr: String, environment: [String]
    ) throws -> (pid: pid_t, started: Double) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let added = environment.map { strdup($0) }
        defer { for pointer in added { free(pointer) } }
        var envp: [UnsafeMutablePointer<CChar>?] = []
        var inherited: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = environ
        while let entry = inherited.pointee {
            envp.append(entry)
            inherited += 1
        }
        envp += added + [nil]
        var pid: pid_t = 0
        let started = now()
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard spawned == 0 else {
            throw BenchError("cannot run \(executable): \(String(cString: strerror(spawned)))")
        }
        return (pid, started)
    }
}

/// Issue 11's chat workload from `teamlog-gen` (a sibling executable) into `path`: its arguments, and the
/// generator's run. The generator picks pending invitations in Dictionary order, which follows Swift's
/// per-process hash seed: deterministic hashing makes the workload the same on every run.
func generateChatWorkload(
    ops: Int, seed: UInt64, users: Int, teams: Int, maxTeam: Int, to path: String, stderr: String
) throws -> (arguments: [String], run: ChildRun) {
    let generator = try ChildProcess.sibling("teamlog-gen")
    let arguments = [
        "--ops", "\(ops)", "--seed", "\(seed)", "--users", "\(users)", "--teams", "\(teams)", "--max-team",
        "\(maxTeam)",
    ]
    print("generating \(fmt(Double(ops))) ops: teamlog-gen \(arguments.joined(separator: " "))…")
    fflush(nil)
    let run = try ChildProcess.run(
        generator, arguments, stdout: path, stderr: stderr, environment: ["SWIFT_DETERMINISTIC_HASHING=1"])
    guard run.succeeded else { throw BenchError("teamlog-gen \(run.ending): \(readText(stderr))") }
    return (arguments, run)
}
