import AsyncHTTPClient
import Hummingbird
import Logging
import ServiceLifecycle
import TeamLog
import TeamLogHTTP
import TeamLogRuntime
import TeamLogStore
import TestSupport

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
    _ method: String, _ url: String, body: String? = nil, headers: [(String, String)] = [], timeout: Int64 = 30
) async throws -> Reply {
    var request = HTTPClientRequest(url: url)
    request.method = .init(rawValue: method)
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    if let body { request.body = .bytes(ByteBuffer(string: body)) }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(timeout))
    let bytes = try await response.body.collect(upTo: 64 << 20)
    return Reply(
        status: Int(response.status.code), body: String(buffer: bytes),
        headers: response.headers.map { ($0.name, $0.value) })
}

/// JSON Lines of ops.
func body(_ lines: [String]) -> String { lines.joined(separator: "\n") + "\n" }
