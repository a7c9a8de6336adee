import AsyncHTTPClient
import Hummingbird
import Logging
import ServiceLifecycle
import TeamLog
@testable import TeamLogHTTP
import TeamLogRuntime
import TeamLogStore
import TestSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real server on an ephemeral loopback port over a real LMDB store in a temporary directory, driven
/// by a real HTTP client (AsyncHTTPClient); `stop()` shuts it down gracefully like SIGTERM does.
final class LiveServer: @unchecked Sendable {
    let directory: TemporaryDirectory
    let writer: WriterService
    let server: TeamLogServer
    let group: ServiceGroup
    let running: Task<Void, any Error>
    let port: Int
    var path: String { directory.child("store") }
    var base: String { "http://127.0.0.1:\(port)" }

    init(
        configuration: ServerConfiguration = ServerConfiguration(), options: WriterService.Options? = nil,
        directory: TemporaryDirectory = TemporaryDirectory("teamlog-http")
    ) async throws {
        self.directory = directory
        var config = configuration
        config.port = 0
        config.host = "127.0.0.1"
        var writerOptions = options ?? WriterService.Options()
        if options == nil { writerOptions.store.noSync = true }
        let metrics = ServerMetrics()
        writer = WriterService(path: directory.child("store"), options: writerOptions) { metrics.record($0) }
        var logger = Logger(label: "test")
        logger.logLevel = .error
        server = TeamLogServer(writer: writer, configuration: config, metrics: metrics, logger: logger)
        group = ServiceGroup(
            configuration: .init(services: [WriterLifecycle(writer: writer), server], logger: logger))
        running = Task { [group] in try await group.run() }
        guard let port = await server.port() else { throw ChildProcessError("the server did not bind") }
        self.port = port
        while writer.state == .opening { try await Task.sleep(for: .milliseconds(2)) }
    }

    /// Graceful shutdown: in-flight requests finish, the writer commits and checkpoints, the store closes.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await running.value
    }
}

/// One HTTP exchange.
struct Reply: Sendable {
    var status: Int
    var body: String
    var headers: [(String, String)]

    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }

    /// The body as JSON.
    var json: JSONValue { (try? JSONParser.parse(body)) ?? .null }

    /// The body as JSON Lines.
    var lines: [JSONValue] {
        body.split(separator: "\n").map { (try? JSONParser.parse(String($0))) ?? .null }
    }
}

/// Sends one request with the shared client.
func send(
    _ method: String, _ url: String, body: String? = nil, headers: [(String, String)] = [], timeout: Int64 = 30,
    client: HTTPClient = .shared
) async throws -> Reply {
    var request = HTTPClientRequest(url: url)
    request.method = .init(rawValue: method)
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    if let body { request.body = .bytes(ByteBuffer(string: body)) }
    let response = try await client.execute(request, timeout: .seconds(timeout))
    let bytes = try await response.body.collect(upTo: 64 << 20)
    return Reply(
        status: Int(response.status.code), body: String(buffer: bytes),
        headers: response.headers.map { ($0.name, $0.value) })
}

/// JSON Lines of ops.
func body(_ lines: [String]) -> String { lines.joined(separator: "\n") + "\n" }

/// Runs `body` with a client that opens as many connections as there are concurrent requests (the shared
/// one keeps 8 per host), for tests of many concurrent clients, and shuts it down on every path: a client
/// dropped without it traps, and a failed request would take the whole test process with it.
func withWideClient<R>(_ body: (HTTPClient) async throws -> R) async throws -> R {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 256
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    let result: R
    do {
        result = try await body(client)
    } catch {
        try? await client.shutdown()
        throw error
    }
    try await client.shutdown()
    return result
}

/// Server-Sent Events read from a streaming response: each event's `id` and `data` lines.
struct SSEEvent: Sendable, Equatable {
    var id: UInt64?
    var name: String?
    var data: [String]
}

/// Reads events from `url` until `stop` says so (given the events so far) or the stream ends; then the
/// connection is dropped (a client going away mid-stream). The deadline covers the whole stream, which a
/// test keeps open across its other requests: in the full suite on two cores, where synchronous tests
/// hold the cooperative pool's threads, a test waited more than 30 s between two of its own steps once
/// (a `deadlineExceeded` in a fresh-clone CI run, the seventeenth session), hence 120 s.
func readEvents(
    _ url: String, headers: [(String, String)] = [], client: HTTPClient = .shared, timeout: Int64 = 120,
    until stop: @escaping @Sendable ([SSEEvent]) -> Bool
) async throws -> (status: Int, events: [SSEEvent]) {
    var request = HTTPClientRequest(url: url)
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    let response = try await client.execute(request, timeout: .seconds(timeout))
    guard response.status.code == 200 else { return (Int(response.status.code), []) }
    var events: [SSEEvent] = []
    var pending = ""
    var current = SSEEvent(id: nil, name: nil, data: [])
    for try await buffer in response.body {
        pending += String(buffer: buffer)
        while let newline = pending.firstIndex(of: "\n") {
            let line = String(pending[..<newline])
            pending = String(pending[pending.index(after: newline)...])
            if line.isEmpty {
                if !current.data.isEmpty || current.name != nil { events.append(current) }
                current = SSEEvent(id: nil, name: nil, data: [])
                if stop(events) { return (200, events) }
            } else if line.hasPrefix("id: ") {
                current.id = UInt64(line.dropFirst(4))
            } else if line.hasPrefix("event: ") {
                current.name = String(line.dropFirst(7))
            } else if line.hasPrefix("data: ") {
                current.data.append(String(line.dropFirst(6)))
            }
        }
    }
    return (200, events)
}

/// Sends `request` as raw bytes on a new loopback connection to `port` and reads the answer until the
/// server closes (for requests an HTTP client will not send: broken framing, undecodable escapes). With
/// `halfClose` the connection's sending side is shut after the request (a body that ends early); without
/// it the request should say `Connection: close` (a server may drop a half-closed connection's answer).
///
/// The socket blocks: it is read on a thread of the server's `BlockingPool` (`onThread`), not on one of Swift
/// concurrency's few threads (the server's handlers run there: with both of a 2-core machine's blocked, the
/// answer waited for the read's timeout).
func sendRaw(_ request: [UInt8], port: Int, halfClose: Bool = false) async throws -> String {
    try await onThread { try exchangeBlocking(request, port: port, halfClose: halfClose).answer }
}

/// Sends raw bytes and reads until the connection ends: what came back, and whether the server closed the
/// connection — an end of file, or a reset (a server that closes before reading all that was sent makes the
/// kernel send one) — rather than the client's read timing out after `receiveTimeoutSeconds`.
func sendRawUntilClosed(_ request: [UInt8], port: Int, receiveTimeoutSeconds: Int) async throws
    -> (answer: String, closedByServer: Bool)
{
    try await onThread {
        try exchangeBlocking(request, port: port, halfClose: false, receiveTimeoutSeconds: receiveTimeoutSeconds)
    }
}

private func exchangeBlocking(_ request: [UInt8], port: Int, halfClose: Bool, receiveTimeoutSeconds: Int = 10)
    throws -> (answer: String, closedByServer: Bool)
{
    let fd = try connectLoopback(port, receiveTimeoutSeconds: receiveTimeoutSeconds)
    defer { close(fd) }
    var sent = 0
    while sent < request.count {
        let n = request[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { throw ChildProcessError("write: \(errno)") }
        sent += n
    }
    if halfClose { shutdown(fd, Int32(SHUT_WR)) }
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    var closedByServer = false
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 {
            closedByServer = n == 0 || errno == ECONNRESET
            break
        }
        answer += buffer[0..<n]
    }
    return (String(decoding: answer, as: UTF8.self), closedByServer)
}
