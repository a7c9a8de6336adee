#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failure to start or talk to a child process, with a message that says what was attempted.
public struct ChildProcessError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A child process started with `posix_spawn`, its stdout captured to a pipe read incrementally.
///
/// Pipes are created close-on-exec, so children spawned concurrently by parallel tests never inherit each
/// other's pipe ends (which would keep a pipe open after its writer died and hide the end of its output).
public final class ChildProcess {
    /// How the child ended.
    public enum Status: Equatable, Sendable, CustomStringConvertible {
        /// Returned from `main` or called `exit` with this code.
        case exited(Int32)
        /// Killed by this signal.
        case signaled(Int32)

        public var description: String {
            switch self {
            case .exited(let code): "exited with \(code)"
            case .signaled(let signal): "killed by signal \(signal)"
            }
        }
    }

    /// The child's process id.
    public let pid: Int32
    /// The executable and arguments, for messages.
    public let commandLine: String
    private var stdoutFD: Int32
    private var buffer: [UInt8] = []
    /// Start of the unread bytes in `buffer` (consumed lines are dropped only when refilling).
    private var start = 0
    private var atEOF = false
    private var status: Status?
    /// Every complete stdout line read so far (without the newline).
    public private(set) var lines: [String] = []

    /// Spawns `executable` with `arguments` (not including argv[0]).
    ///
    /// - Parameters:
    ///   - environment: extra variables added to (or replacing those of) this process's environment.
    ///   - stdin: a file to read standard input from; `nil` for `/dev/null`.
    ///   - stderr: a file to write standard error to (created or truncated); `nil` for `/dev/null`.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil,
        stderr: String? = nil
    ) throws {
        commandLine = ([executable] + arguments).joined(separator: " ")
        guard access(executable, X_OK) == 0 else {
            throw ChildProcessError(
                "cannot execute \(executable): \(String(cString: strerror(errno))) (is it built? run `swift build`)")
        }
        // `pipe2` is not imported (it needs _GNU_SOURCE): mark both ends close-on-exec under a lock that
        // every spawn takes, so no concurrent spawn from this process inherits them in between.
        Self.spawnLock.lock()
        defer { Self.spawnLock.unlock() }
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw ChildProcessError("pipe failed: \(String(cString: strerror(errno)))")
        }
        let (readEnd, writeEnd) = (fds[0], fds[1])
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        defer { close(writeEnd) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin ?? "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 1)
        posix_spawn_file_actions_addopen(&actions, 2, stderr ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)

        // Default dispositions and an empty mask: the test runner's signal setup must not leak into the child.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD] { sigaddset(&defaults, signal) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var merged: [String: String] = [:]
        var entry = environ
        while let pair = entry.pointee {
            let text = String(cString: pair)
            if let eq = text.firstIndex(of: "=") {
                merged[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
            entry += 1
        }
        for (key, value) in environment { merged[key] = value }

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for p in argv { free(p) }
            for p in envp { free(p) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else {
            close(readEnd)
            throw ChildProcessError("posix_spawn \(executable) failed: \(String(cString: strerror(rc)))")
        }
        pid = child
        stdoutFD = readEnd
    }

    deinit {
        // A test that failed half-way must not leave a process behind (or a zombie).
        if status == nil {
            Glibc.kill(pid, SIGKILL)
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
        }
        if stdoutFD >= 0 { close(stdoutFD) }
    }

    /// Sends `signal` to the child (no effect once it has been waited for).
    public func kill(_ signal: Int32) {
        guard status == nil else { return }
        Glibc.kill(pid, signal)
    }

    /// Waits for the child to end and returns how it ended. Its remaining output stays readable.
    @discardableResult
    public func wait() -> Status {
        if let status { return status }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 {
            if errno != EINTR { break }
        }
        // WIFEXITED / WTERMSIG are C macros Swift does not import.
        let result: Status = (raw & 0x7F) == 0 ? .exited((raw >> 8) & 0xFF) : .signaled(raw & 0x7F)
        status = result
        return result
    }

    /// How the child ended, if it has, without waiting for it.
    public func poll() -> Status? {
        if let status { return status }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
        let result: Status = (raw & 0x7F) == 0 ? .exited((raw >> 8) & 0xFF) : .signaled(raw & 0x7F)
        status = result
        return result
    }

    /// Reads more stdout into the buffer; false at end of output or when `deadline` passes first.
    private func fill(deadline: Double) throws -> Bool {
        if atEOF { return false }
        while true {
            let left = deadline - Self.now()
            if left <= 0 { return false }
            var poller = pollfd(fd: stdoutFD, events: Int16(POLLIN), revents: 0)
            let ready = Glibc.poll(&poller, 1, Int32(min(left * 1000, 1_000_000).rounded(.up)))
            if ready < 0 {
                if errno == EINTR { continue }
                throw ChildProcessError("poll failed: \(String(cString: strerror(errno)))")
            }
            if ready == 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            let n = chunk.withUnsafeMutableBytes { read(stdoutFD, $0.baseAddress!, $0.count) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw ChildProcessError("read failed: \(String(cString: strerror(errno)))")
            }
            if n == 0 {
                atEOF = true
                return false
            }
            if start > 0 {
                buffer.removeSubrange(..<start)
                start = 0
            }
            buffer.append(contentsOf: chunk[0..<n])
            return true
        }
    }

    /// The next complete stdout line (without its newline); `nil` at end of output or when `timeout`
    /// seconds pass first (see `reachedEnd`). A last line without newline stays in `unterminatedTail`.
    public func readLine(timeout: Double) throws -> String? {
        let deadline = Self.now() + timeout
        var scanned = start
        while true {
            if let nl = buffer[scanned...].firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[start..<nl], as: UTF8.self)
                start = nl + 1
                lines.append(line)
                return line
            }
            scanned = buffer.count - start
            guard try fill(deadline: deadline) else { return nil }
            scanned += start
        }
    }

    /// Reads lines until one contains `text` (true), or until end of output or `timeout` (false).
    public func waitForOutput(containing text: String, timeout: Double) throws -> Bool {
        let deadline = Self.now() + timeout
        while let line = try readLine(timeout: max(deadline - Self.now(), 0)) {
            if line.contains(text) { return true }
        }
        return false
    }

    /// Reads every line until end of output; throws when `timeout` passes first.
    @discardableResult
    public func readToEnd(timeout: Double) throws -> [String] {
        let deadline = Self.now() + timeout
        var read: [String] = []
        while true {
            if let line = try readLine(timeout: max(deadline - Self.now(), 0)) {
                read.append(line)
            } else if atEOF {
                return read
            } else {
                throw ChildProcessError("\(commandLine): output did not end within \(timeout) s")
            }
        }
    }

    /// Whether the child's stdout reached its end (every writer closed it).
    public var reachedEnd: Bool { atEOF }

    /// Bytes after the last newline (a line cut short, e.g. by a kill), once the output ended.
    public var unterminatedTail: [UInt8] { atEOF ? Array(buffer[start...]) : [] }

    /// Serializes pipe creation and spawning across threads (see `init`).
    private static let spawnLock = SpawnLock()

    /// Seconds from a monotonic clock.
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// A process-wide mutex on a heap address of its own (a pthread mutex must never move).
private final class SpawnLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }
}

extension ChildProcess {
    /// Runs `executable` to completion, draining stdout; returns its status and stdout lines.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil,
        stderr: String? = nil, timeout: Double
    ) throws -> (status: Status, lines: [String]) {
        let child = try ChildProcess(executable, arguments, environment: environment, stdin: stdin, stderr: stderr)
        let lines = try child.readToEnd(timeout: timeout)
        return (child.wait(), lines)
    }
}

/// Namespace for helpers shared by the test targets.
public enum TestSupport {
    /// The built `teamlog` executable, found in the test bundle's directory or one above it (e.g.
    /// `.build/debug/teamlog`, `.build/x86_64-unknown-linux-gnu/debug/teamlog`).
    ///
    /// When it is not built this is the path where it was expected, so spawning it fails with a
    /// `ChildProcessError` that names the path and says to run `swift build`, rather than crashing.
    public static let teamlogExecutable: String =
        findExecutable("teamlog") ?? bundleDirectory + "/teamlog"

    /// Whether `teamlogExecutable` exists (for `.enabled(if:)` traits or early messages).
    public static var teamlogIsBuilt: Bool { access(teamlogExecutable, X_OK) == 0 }

    static var bundleDirectory: String { absolute(directory(of: CommandLine.arguments.first ?? ".")) }

    /// The first directory from the test bundle's upward holding an executable file named `name`.
    static func findExecutable(_ name: String) -> String? {
        var dir = bundleDirectory
        while true {
            let candidate = dir == "/" ? "/" + name : dir + "/" + name
            var st = stat()
            if stat(candidate, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG && access(candidate, X_OK) == 0 {
                return candidate
            }
            if dir == "/" || dir.isEmpty || dir == "." { return nil }
            dir = directory(of: dir)
        }
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static func absolute(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
