import NATS
import NATSServer
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Seconds from a monotonic clock.
func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// A thread-safe box the handlers of subscriptions append to.
final class Inbox: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var items: [NATSMessage] = []

    init() { pthread_mutex_init(&mutex, nil) }

    func append(_ message: NATSMessage) {
        pthread_mutex_lock(&mutex)
        items.append(message)
        pthread_mutex_unlock(&mutex)
    }

    var messages: [NATSMessage] {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return items
    }

    /// Waits until at least `count` messages arrived (true) or `timeout` seconds passed (false).
    func wait(for count: Int, timeout: Double) -> Bool {
        let deadline = now() + timeout
        while now() < deadline {
            if messages.count >= count { return true }
            usleep(5_000)
        }
        return messages.count >= count
    }
}

/// Core NATS against a real single `nats-server`: connecting, publish/subscribe, request/reply.
@Suite  // no skip when nats-server is missing: tools/ensure-deps.sh installs it, and a missing server must fail
struct NATSCoreTests {
    let directory = TemporaryDirectory("nats-core")
    let server: NATSServerProcess

    init() throws {
        server = try NATSServerProcess.start(jetStream: false, storeDir: nil)
    }

    func connect() throws -> NATSConnection {
        var options = NATSConnection.Options(servers: [server.url])
        options.name = "teamlog-test"
        return try NATSConnection(options)
    }

    @Test func connectingWhereNoServerListensFailsFastWithAClearError() throws {
        // A port that was free a moment ago: nothing listens there.
        let probe = try NATSServerProcess.start(jetStream: false, storeDir: nil)
        let url = probe.url
        probe.kill()
        var options = NATSConnection.Options(servers: [url])
        options.connectTimeoutMs = 1_000
        let started = now()
        let error = #expect(throws: NATSError.self) { try NATSConnection(options) }
        #expect(now() - started < 5)
        #expect(error?.code == .noServers)
        #expect(error?.message.contains("cannot connect to NATS at \(url)") == true)
        #expect(error?.description.contains(url) == true)
    }

    @Test func publishSubscribeRoundTripWithHeaders() throws {
        let connection = try connect()
        #expect(connection.connectedURL?.contains(String(server.port)) == true)
        let inbox = Inbox()
        let subscription = try connection.subscribe("events.>") { inbox.append($0) }
        try connection.flush(timeoutMs: 2_000)
        try connection.publish("events.a", Array("one".utf8), headers: [("Team", "red"), ("Team", "blue"), ("X", "1")])
        try connection.publish("events.b", Array("two".utf8))
        try connection.publish("other", Array("not for us".utf8))
        #expect(inbox.wait(for: 2, timeout: 5))
        let messages = inbox.messages
        #expect(messages.count == 2)
        #expect(messages.first?.subject == "events.a")
        #expect(messages.first?.data == Array("one".utf8))
        #expect(messages.first?.headers["Team"] == ["red", "blue"])
        #expect(messages.first?.header("X") == "1")
        #expect(messages.first?.streamSequence == nil)
        #expect(messages.last?.subject == "events.b")
        #expect(messages.last?.headers.isEmpty == true)

        subscription.cancel()
        #expect(!subscription.isValid)
        try connection.publish("events.c", Array("after cancel".utf8))
        try connection.flush(timeoutMs: 2_000)
        usleep(100_000)
        #expect(inbox.messages.count == 2)
    }

    @Test func requestReplyAndNoResponders() throws {
        let responder = try connect()
        let requester = try connect()
        let subscription = try responder.subscribe("echo", queue: "workers") { message in
            try? responder.respond(to: message, Array("re: ".utf8) + message.data)
        }
        try responder.flush(timeoutMs: 2_000)
        let reply = try requester.request("echo", Array("hi".utf8), timeoutMs: 2_000)
        #expect(reply.data == Array("re: hi".utf8))
        withExtendedLifetime(subscription) {}

        let error = #expect(throws: NATSError.self) { try requester.request("nobody", [], timeoutMs: 1_000) }
        #expect(error?.code == .noResponders || error?.code == .timeout)

        let notARequest = NATSMessage(subject: "x", data: [])
        #expect(throws: NATSError.self) { try responder.respond(to: notARequest, []) }
    }

    @Test func closedConnectionRefusesPublishes() throws {
        let connection = try connect()
        connection.close()
        #expect(connection.isClosed)
        let error = #expect(throws: NATSError.self) { try connection.publish("a", [1]) }
        #expect(error?.code == .connectionClosed)
    }
}
