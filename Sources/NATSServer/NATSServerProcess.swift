import TeamLogThreads
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Design: real `nats-server` processes for tests, the demo and benchmarks, with no NATS client in this
// target (readiness is checked over plain sockets: the client port accepting connections, and for clusters
// the monitoring endpoints `/healthz` and `/jsz` reporting a JetStream meta leader).
// - Ports are chosen by binding 127.0.0.1:0 and closing the socket; a server that then fails to bind
//   (someone else took the port) exits, which `start` notices, and a fresh port is tried.
// - Processes are spawned with `posix_spawn` (default signal dispositions, empty mask), stdin from
//   /dev/null, stdout and stderr appended to `logFile`; every wait is bounded and its error quotes the
//   end of the log.
// - A process is killed (SIGKILL) and reaped in `deinit`, so a failing test leaks no server. `restart`
//   reuses the same port, store directory and arguments.

/// A failure to start, reach or stop a `nats-server`, with what was attempted and the end of its log.
public struct NATSServerError: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public var description: String
    /// Makes an error with `description`.
    public init(_ description: String) { self.description = description }
}

/// One `nats-server` child process on a loopback port.
public final class NATSServerProcess: @unchecked Sendable {
    /// The client port on 127.0.0.1.
    public let port: Int
    /// The JetStream store directory (`nil` without JetStream).
    public let storeDir: String?
    /// The file receiving the server's stdout and stderr.
    public let logFile: String
    /// The arguments given to `nats-server` (the same on every restart).
    public let arguments: [String]
    /// The monitoring port, when monitoring is on (clusters use it to wait for a meta leader).
    public let monitorPort: Int?
    private let lock = Monitor()
    private var pid: pid_t?

    /// The client URL, `nats://127.0.0.1:<port>`.
    public var url: String { "nats://127.0.0.1:\(port)" }

    /// The process id while running.
    public var processID: Int32? { lock.locked { pid } }

    /// Whether the process was started and not yet stopped or killed (it may have died on its own).
    public var isRunning: Bool { lock.locked { pid != nil } }

    private init(port: Int, storeDir: String?, logFile: String, arguments: [String], monitorPort: Int?) {
        self.port = port
        self.storeDir = storeDir
        self.logFile = logFile
        self.arguments = arguments
        self.monitorPort = monitorPort
    }

    deinit { kill() }

    /// Starts a server on a free loopback port and waits (at most `timeout` seconds) until it accepts
    /// connections.
    ///
    /// - Parameters:
    ///   - jetStream: enables JetStream with `storeDir` (required then).
    ///   - storeDir: JetStream's store; the log goes to `<storeDir>.log` (or a file in /tmp without one).
    ///   - port: a fixed client port instead of a free one.
    ///   - monitor: also open the HTTP monitoring port (a free one).
    ///   - extraArguments: more `nats-server` arguments (e.g. cluster options).
    public static func start(
        jetStream: Bool = true, storeDir: String?, port: Int? = nil, monitor: Bool = false,
        extraArguments: [String] = [], timeout: Double = 10
    ) throws -> NATSServerProcess {
        if jetStream && storeDir == nil { throw NATSServerError("JetStream needs a store directory") }
        var lastError: NATSServerError?
        for _ in 0..<(port == nil ? 3 : 1) {  // a free port may be taken before the server binds it
            let clientPort = try port ?? freePort()
            let monitorPort = monitor ? try freePort() : nil
            var arguments = ["-a", "127.0.0.1", "-p", String(clientPort)]
            if let monitorPort { arguments += ["-m", String(monitorPort)] }
            if jetStream, let storeDir { arguments += ["-js", "--store_dir", storeDir] }
            arguments += extraArguments
            let logFile = storeDir.map { $0 + ".log" } ?? "/tmp/nats-server-\(getpid())-\(clientPort).log"
            let server = NATSServerProcess(
                port: clientPort, storeDir: storeDir, logFile: logFile, arguments: arguments,
                monitorPort: monitorPort)
            do {
                try server.launch(timeout: timeout)
                return server
            } catch let error as NATSServerError {
                lastError = error
            }
        }
        throw lastError ?? NATSServerError("nats-server did not start")
    }

    /// Kills the process with SIGKILL (a crash: nothing is flushed) and reaps it. Idempotent.
    public func kill() {
        lock.locked {
            guard let running = pid else { return }
            Glibc.kill(running, SIGKILL)
            Self.reap(running)
            pid = nil
        }
    }

    /// Stops the process with SIGTERM (a clean shutdown) and waits up to `timeout` seconds for it,
    /// killing it when it takes longer. Idempotent.
    public func stop(timeout: Double = 10) {
        lock.locked {
            guard let running = pid else { return }
            Glibc.kill(running, SIGTERM)
            let deadline = monotonicNow() + timeout
            while monotonicNow() < deadline {
                var status: Int32 = 0
                let r = waitpid(running, &status, WNOHANG)
                if r == running || (r < 0 && errno == ECHILD) {
                    pid = nil
                    return
                }
                usleep(10_000)
            }
            Glibc.kill(running, SIGKILL)
            Self.reap(running)
            pid = nil
        }
    }

    /// Starts the server again (after `stop` or `kill`, or killing it first) on the same port with the
    /// same store directory and arguments, and waits until it accepts connections.
    public func restart(timeout: Double = 10) throws {
        stop()
        try launch(timeout: timeout)
    }

    /// The last `lines` lines of the log (for error messages).
    public func logTail(lines: Int = 15) -> String {
        guard let file = fopen(logFile, "r") else { return "(no log at \(logFile))" }
        defer { fclose(file) }
        var all: [String] = []
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        while getline(&line, &capacity, file) > 0 {
            if let line { all.append(String(cString: line)) }
        }
        free(line)
        return all.suffix(lines).joined()
    }

    // MARK: Internals

    private func launch(timeout: Double) throws {
        let executable = try Self.executable()
        let child = try spawn(executable, arguments, output: logFile)
        lock.locked { pid = child }
        let deadline = monotonicNow() + timeout
        while true {
            if canConnect(port: port) { return }
            var status: Int32 = 0
            if waitpid(child, &status, WNOHANG) == child {
                lock.locked { pid = nil }
                throw NATSServerError(
                    "nats-server on port \(port) exited during startup (status \(status)); log \(logFile):\n"
                        + logTail())
            }
            if monotonicNow() >= deadline {
                kill()
                throw NATSServerError(
                    "nats-server on port \(port) did not accept connections within \(timeout) s; log \(logFile):\n"
                        + logTail())
            }
            usleep(20_000)
        }
    }

    private static func reap(_ pid: pid_t) {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }

    /// The `nats-server` executable: `$NATS_SERVER`, else the first on `$PATH`, /usr/sbin, /usr/bin or
    /// /usr/local/bin.
    public static func executable() throws -> String {
        if let explicit = getenv("NATS_SERVER").map({ String(cString: $0) }), !explicit.isEmpty { return explicit }
        let path = getenv("PATH").map { String(cString: $0) } ?? ""
        let dirs = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/bin", "/usr/local/bin"]
        for dir in dirs where access(dir + "/nats-server", X_OK) == 0 { return dir + "/nats-server" }
        throw NATSServerError(
            "nats-server not found on PATH, /usr/sbin, /usr/bin or /usr/local/bin (install it: tools/ensure-deps.sh)")
    }

    /// Whether `nats-server` is installed (for enabling tests).
    public static var isAvailable: Bool { (try? executable()) != nil }
}

/// A JetStream cluster of `nats-server` processes on loopback, routed to each other.
public final class NATSCluster: @unchecked Sendable {
    /// The nodes, in order (`n1`, `n2`, ...).
    public let nodes: [NATSServerProcess]
    /// The client URLs of every node (give them all to a client so it fails over).
    public var urls: [String] { nodes.map(\.url) }

    private init(nodes: [NATSServerProcess]) { self.nodes = nodes }

    /// Starts `nodes` servers named n1...nN in cluster `name`, with stores under `baseDir/nI`, and waits (at
    /// most `timeout` seconds) until every node is healthy and reports the same JetStream meta leader.
    public static func start(nodes count: Int = 3, baseDir: String, name: String = "teamlog", timeout: Double = 30)
        throws -> NATSCluster
    {
        precondition(count >= 1)
        let clusterPorts = try (0..<count).map { _ in try freePort() }
        var nodes: [NATSServerProcess] = []
        for i in 0..<count {
            let routes = clusterPorts.enumerated().filter { $0.offset != i }.map { "nats://127.0.0.1:\($0.element)" }
            let args = [
                "--server_name", "n\(i + 1)", "--cluster_name", name,
                "--cluster", "nats://127.0.0.1:\(clusterPorts[i])", "--routes", routes.joined(separator: ","),
            ]
            nodes.append(
                try NATSServerProcess.start(
                    jetStream: true, storeDir: baseDir + "/n\(i + 1)", monitor: true, extraArguments: args,
                    timeout: timeout))
        }
        let cluster = NATSCluster(nodes: nodes)
        try cluster.waitForMetaLeader(timeout: timeout)
        return cluster
    }

    /// Waits until every running node answers `/healthz` with ok and all report the same meta leader.
    public func waitForMetaLeader(timeout: Double = 30) throws {
        let deadline = monotonicNow() + timeout
        var last = ""
        while monotonicNow() < deadline {
            var leaders = Set<String>()
            var healthy = true
            for node in nodes where node.isRunning {
                guard let monitor = node.monitorPort,
                    let health = httpGet(port: monitor, path: "/healthz"), health.contains("\"ok\""),
                    let jsz = httpGet(port: monitor, path: "/jsz"), let leader = metaLeader(in: jsz)
                else {
                    healthy = false
                    last = "node on port \(node.port) not ready"
                    break
                }
                leaders.insert(leader)
            }
            if healthy && leaders.count == 1 { return }
            if healthy { last = "nodes disagree on the meta leader: \(leaders.sorted())" }
            usleep(100_000)
        }
        throw NATSServerError(
            "the JetStream cluster has no meta leader after \(timeout) s (\(last)); log of n1:\n"
                + (nodes.first?.logTail() ?? ""))
    }

    /// The node started with `--server_name name` (`n1`, `n2`, ...).
    public func node(named name: String) -> NATSServerProcess? {
        guard name.first == "n", let index = Int(name.dropFirst()), index >= 1, index <= nodes.count else {
            return nil
        }
        return nodes[index - 1]
    }

    /// Stops every node (SIGTERM).
    public func stop() { for node in nodes { node.stop() } }

    deinit { for node in nodes { node.kill() } }
}

// MARK: - Sockets and processes

/// A port on 127.0.0.1 that was free a moment ago.
func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw NATSServerError("socket failed: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var address = loopback(port: 0)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw NATSServerError("bind 127.0.0.1:0 failed: \(String(cString: strerror(errno)))") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

func loopback(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return address
}

/// A connected TCP socket to 127.0.0.1:`port`, or -1.
func connectLoopback(port: Int) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return -1 }
    var address = loopback(port: port)
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    if rc != 0 {
        close(fd)
        return -1
    }
    return fd
}

func canConnect(port: Int) -> Bool {
    let fd = connectLoopback(port: port)
    if fd < 0 { return false }
    close(fd)
    return true
}

/// The body of `GET path` from 127.0.0.1:`port` (HTTP/1.0, read to the end, 2 s at most), or nil.
func httpGet(port: Int, path: String) -> String? {
    let fd = connectLoopback(port: port)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    let request = Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8)
    guard request.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == request.count else { return nil }
    var response: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16_384)
    let deadline = monotonicNow() + 2
    while monotonicNow() < deadline {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        if poll(&poller, 1, 200) <= 0 { continue }
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        response += chunk[0..<n]
    }
    let text = String(decoding: response, as: UTF8.self)
    guard let split = text.firstRange(of: "\r\n\r\n") else { return nil }
    return String(text[split.upperBound...])
}

/// The meta leader's name in a `/jsz` body, nil when there is none yet.
func metaLeader(in jsz: String) -> String? {
    guard let meta = jsz.firstRange(of: "\"meta_cluster\""),
        let key = jsz[meta.upperBound...].firstRange(of: "\"leader\":")
    else { return nil }
    let rest = jsz[key.upperBound...].drop(while: { $0 == " " })
    guard rest.first == "\"" else { return nil }
    let name = rest.dropFirst().prefix(while: { $0 != "\"" })
    return name.isEmpty ? nil : String(name)
}

/// Spawns `executable` with `arguments`, stdin from /dev/null, stdout and stderr appended to `output`.
func spawn(_ executable: String, _ arguments: [String], output: String) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)

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

    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for p in argv { free(p) } }
    var child: pid_t = 0
    let rc = posix_spawn(&child, executable, &actions, &attributes, argv, environ)
    guard rc == 0 else { throw NATSServerError("posix_spawn \(executable) failed: \(String(cString: strerror(rc)))") }
    return child
}

/// Seconds from a monotonic clock.
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

