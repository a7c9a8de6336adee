import Synchronization
import TeamLogThreads
internal import CNATS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Design:
// - libnats is opened once per process (`nats_Open(-1)`) on first use and never closed: its threads and
//   timers are shared by every connection.
// - Connecting is bounded: the library's `retryOnFailedConnect` stays off, every server gets one attempt
//   within `connectTimeoutMs`, and a failure throws at once with the servers tried in the message
//   ("cannot connect to NATS at nats://127.0.0.1:4222: no servers available for connection"). Reconnects
//   after a successful connect (`maxReconnects` x `reconnectWaitMs`) are the library's job.
// - Handlers of `subscribe` run on the subscription's own library thread, one message at a time; they
//   receive a copied `NATSMessage`, so nothing C escapes. The handler box is retained by the C
//   subscription and released by the library's "on complete" callback, which runs only once the
//   subscription is closed and its last handler call returned: cancelling from another thread while a
//   handler runs is safe.
// - Objects own their C handles and free them in `deinit`: a `NATSSubscription` and a `JetStream` hold
//   their connection strongly, so a connection outlives everything made from it.

/// C strings that live as long as the arena (for C structs that point at several strings at once).
final class CStringArena {
    private var owned: [UnsafeMutablePointer<CChar>] = []

    /// A copy of `text` valid until the arena dies.
    func callAsFunction(_ text: String) -> UnsafePointer<CChar> {
        let copy = strdup(text)!
        owned.append(copy)
        return UnsafePointer(copy)
    }

    /// A copy of `text`, or `nil` for `nil`.
    func optional(_ text: String?) -> UnsafePointer<CChar>? { text.map { self($0) } }

    deinit { for p in owned { free(p) } }
}

/// Opens libnats once per process.
enum NATSLibrary {
    private static let openStatus: UInt32 = nats_Open(-1).rawValue

    static func open() throws {
        let status = natsStatus(rawValue: openStatus)
        if status != NATS_OK { throw NATSError.from(status, "nats_Open") }
    }
}

/// A connection to a NATS server (or cluster): core publish, request/reply, subscriptions, and the door to
/// JetStream.
///
/// Thread-safe (libnats locks internally). Closed by `close()` or when the last reference goes away.
public final class NATSConnection: @unchecked Sendable {
    /// How to connect.
    public struct Options: Sendable {
        /// Server URLs, e.g. `nats://127.0.0.1:4222`; with several, the library picks among them and
        /// fails over on reconnect.
        public var servers: [String]
        /// A connection name shown by the server's monitoring.
        public var name: String?
        /// How long one connection attempt to one server may take, in milliseconds.
        public var connectTimeoutMs = 2_000
        /// How many reconnect attempts after losing an established connection (-1: forever).
        public var maxReconnects = 60
        /// The wait between two reconnect attempts to the same server, in milliseconds.
        public var reconnectWaitMs = 250
        /// Whether to try the servers in the given order instead of a random one.
        public var noRandomize = false
        /// Told when an established connection is lost and when it is back (on a library thread): a
        /// long-running service says so, since its work just pauses meanwhile.
        public var onConnectionEvent: (@Sendable (ConnectionEvent) -> Void)?

        /// Options for `servers` with the defaults above.
        public init(servers: [String]) { self.servers = servers }
    }

    /// A change of an established connection's state.
    public enum ConnectionEvent: Sendable {
        /// The connection to the server was lost; the library reconnects (within `maxReconnects`).
        case disconnected
        /// Connected again, to this server.
        case reconnected(url: String)
    }

    let nc: OpaquePointer
    /// The options it connected with.
    public let options: Options
    /// `onConnectionEvent`, boxed for the C callbacks; released with the connection.
    private let eventBox: Unmanaged<EventBox>?

    /// Connects to one of `options.servers`; throws a `NATSError` (code `.noServers`, `.timeout`, ...)
    /// naming the servers when none answers, without retrying in the background.
    public init(_ options: Options) throws {
        try NATSLibrary.open()
        self.options = options
        guard !options.servers.isEmpty else {
            throw NATSError(code: .invalidArgument, message: "no server URL given", context: "connect")
        }
        var opts: OpaquePointer?
        try check(natsOptions_Create(&opts), "natsOptions_Create")
        guard let opts else { throw NATSError(code: .illegalState, message: "no options", context: "connect") }
        defer { natsOptions_Destroy(opts) }
        let arena = CStringArena()
        var urls: [UnsafePointer<CChar>?] = options.servers.map { arena($0) }
        try check(natsOptions_SetServers(opts, &urls, Int32(urls.count)), "natsOptions_SetServers")
        try check(natsOptions_SetTimeout(opts, Int64(options.connectTimeoutMs)), "natsOptions_SetTimeout")
        try check(natsOptions_SetMaxReconnect(opts, Int32(options.maxReconnects)), "natsOptions_SetMaxReconnect")
        try check(natsOptions_SetReconnectWait(opts, Int64(options.reconnectWaitMs)), "natsOptions_SetReconnectWait")
        try check(natsOptions_SetNoRandomize(opts, options.noRandomize), "natsOptions_SetNoRandomize")
        try check(natsOptions_SetRetryOnFailedConnect(opts, false, nil, nil), "natsOptions_SetRetryOnFailedConnect")
        if let name = options.name { try check(natsOptions_SetName(opts, name), "natsOptions_SetName") }
        let box = options.onConnectionEvent.map { Unmanaged.passRetained(EventBox($0)) }
        eventBox = box
        if let box {
            let context = box.toOpaque()
            try check(
                natsOptions_SetDisconnectedCB(
                    opts, { _, context in
                        guard let context else { return }
                        Unmanaged<EventBox>.fromOpaque(context).takeUnretainedValue().handler(.disconnected)
                    }, context), "natsOptions_SetDisconnectedCB")
            try check(
                natsOptions_SetReconnectedCB(
                    opts, { nc, context in
                        guard let context, let nc else { return }
                        var buffer = [CChar](repeating: 0, count: 256)
                        let url =
                            natsConnection_GetConnectedUrl(nc, &buffer, buffer.count) == NATS_OK
                            ? String(cString: buffer) : "?"
                        Unmanaged<EventBox>.fromOpaque(context).takeUnretainedValue().handler(.reconnected(url: url))
                    }, context), "natsOptions_SetReconnectedCB")
        }
        var handle: OpaquePointer?
        let status = natsConnection_Connect(&handle, opts)
        guard status == NATS_OK, let handle else {
            var error = NATSError.from(status, "natsConnection_Connect")
            error.message =
                "cannot connect to NATS at \(options.servers.joined(separator: ", ")): \(error.message)"
            throw error
        }
        nc = handle
        withExtendedLifetime(arena) {}
    }

    deinit {
        eventBox?.takeUnretainedValue().closing.store(true, ordering: .releasing)
        // The box is not released: libnats may still run a callback on its own thread after this returns.
        natsConnection_Destroy(nc)
    }

    /// Publishes `data` on `subject` (fire and forget; `flush` to know the server has it).
    public func publish(_ subject: String, _ data: [UInt8], headers: [(String, String)] = []) throws {
        try publish(subject, reply: nil, data, headers: headers)
    }

    /// Publishes `data` on `subject` with a reply subject.
    public func publish(_ subject: String, reply: String?, _ data: [UInt8], headers: [(String, String)] = []) throws
    {
        if headers.isEmpty && reply == nil {
            let status = data.withUnsafeBytes { natsConnection_Publish(nc, subject, $0.baseAddress, Int32($0.count)) }
            try check(status, "natsConnection_Publish \(subject)")
            return
        }
        let msg = try makeMessage(subject, reply: reply, data, headers: headers)
        defer { natsMsg_Destroy(msg) }
        try check(natsConnection_PublishMsg(nc, msg), "natsConnection_PublishMsg \(subject)")
    }

    /// Sends a request and waits up to `timeoutMs` for the first reply; `.noResponders` when nobody
    /// subscribes to `subject`, `.timeout` when nobody answered in time.
    public func request(_ subject: String, _ data: [UInt8], timeoutMs: Int) throws -> NATSMessage {
        var reply: OpaquePointer?
        let status = data.withUnsafeBytes {
            natsConnection_Request(&reply, nc, subject, $0.baseAddress, Int32($0.count), Int64(timeoutMs))
        }
        try check(status, "natsConnection_Request \(subject)")
        guard let reply else {
            throw NATSError(code: .illegalState, message: "no reply", context: "natsConnection_Request \(subject)")
        }
        defer { natsMsg_Destroy(reply) }
        return NATSMessage(copying: reply)
    }

    /// Subscribes to `subject` (wildcards allowed), in queue group `queue` when given.
    ///
    /// The handler runs on a library thread dedicated to this subscription, one message at a time. The
    /// subscription ends on `cancel()` or when the returned object goes away.
    public func subscribe(
        _ subject: String, queue: String? = nil, _ handler: @escaping @Sendable (NATSMessage) -> Void
    ) throws -> NATSSubscription {
        let box = Unmanaged.passRetained(HandlerBox(handler))
        let onMessage: natsMsgHandler = { _, _, msg, closure in
            guard let msg else { return }
            let message = NATSMessage(copying: msg)
            natsMsg_Destroy(msg)
            guard let closure else { return }
            Unmanaged<HandlerBox>.fromOpaque(closure).takeUnretainedValue().handler(message)
        }
        var sub: OpaquePointer?
        let status: natsStatus
        if let queue {
            status = natsConnection_QueueSubscribe(&sub, nc, subject, queue, onMessage, box.toOpaque())
        } else {
            status = natsConnection_Subscribe(&sub, nc, subject, onMessage, box.toOpaque())
        }
        guard status == NATS_OK, let sub else {
            box.release()
            throw NATSError.from(status, "natsConnection_Subscribe \(subject)")
        }
        // Releases the box once no handler call can follow; if that cannot be set (the subscription closed
        // already), the box is leaked rather than freed under a running handler.
        _ = natsSubscription_SetOnCompleteCB(
            sub, { closure in closure.map { Unmanaged<HandlerBox>.fromOpaque($0).release() } }, box.toOpaque())
        return NATSSubscription(connection: self, sub: sub, subject: subject)
    }

    /// Replies to a request `message` (publishes `data` to its reply subject).
    public func respond(to message: NATSMessage, _ data: [UInt8], headers: [(String, String)] = []) throws {
        guard let reply = message.reply else {
            throw NATSError(
                code: .invalidArgument, message: "the message has no reply subject",
                context: "respond \(message.subject)")
        }
        try publish(reply, data, headers: headers)
    }

    /// Sends a PING and waits up to `timeoutMs` for the PONG: everything published before is at the server.
    public func flush(timeoutMs: Int) throws {
        try check(natsConnection_FlushTimeout(nc, Int64(timeoutMs)), "natsConnection_FlushTimeout")
    }

    /// A JetStream context on this connection; `timeoutMs` bounds each JetStream API call and publish,
    /// `maxPendingAsync` the asynchronous publishes in flight (`publishAsync` waits for room).
    public func jetStream(timeoutMs: Int = 5_000, maxPendingAsync: Int = 4_096) throws -> JetStream {
        try JetStream(connection: self, timeoutMs: timeoutMs, maxPendingAsync: maxPendingAsync)
    }

    /// Closes the connection (subscriptions end, later calls fail with `.connectionClosed`). Idempotent.
    public func close() {
        eventBox?.takeUnretainedValue().closing.store(true, ordering: .releasing)  // a close is no lost connection
        natsConnection_Close(nc)
    }

    /// Whether the connection is closed (by `close()` or after reconnects ran out).
    public var isClosed: Bool { natsConnection_IsClosed(nc) }

    /// The largest message (headers and data) the connected server accepts: its `max_payload`
    /// (1 MiB unless configured; at most 64 MiB).
    public var maxPayload: Int { Int(natsConnection_GetMaxPayload(nc)) }

    /// Whether the connection is currently reconnecting.
    public var isReconnecting: Bool { natsConnection_IsReconnecting(nc) }

    /// The URL of the server currently connected to, or `nil` when not connected.
    public var connectedURL: String? {
        var buffer = [CChar](repeating: 0, count: 512)
        guard natsConnection_GetConnectedUrl(nc, &buffer, buffer.count) == NATS_OK, buffer[0] != 0 else {
            return nil
        }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// The Swift handler of a subscription, retained by the C subscription until it completes.
private final class HandlerBox {
    let handler: @Sendable (NATSMessage) -> Void
    init(_ handler: @escaping @Sendable (NATSMessage) -> Void) { self.handler = handler }
}

/// A live core NATS subscription; unsubscribes on `cancel()` or `deinit`.
public final class NATSSubscription: @unchecked Sendable {
    private let connection: NATSConnection
    private let lock = Monitor()
    private var sub: OpaquePointer?
    /// The subject subscribed to.
    public let subject: String

    init(connection: NATSConnection, sub: OpaquePointer, subject: String) {
        self.connection = connection
        self.sub = sub
        self.subject = subject
    }

    /// Removes interest (no handler call starts afterwards, one in progress may finish). Idempotent; may be
    /// called from the handler itself.
    public func cancel() {
        let taken: OpaquePointer? = lock.locked {
            defer { sub = nil }
            return sub
        }
        guard let taken else { return }
        _ = natsSubscription_Unsubscribe(taken)
        natsSubscription_Destroy(taken)
    }

    /// Whether the subscription is still open.
    public var isValid: Bool { lock.locked { sub.map { natsSubscription_IsValid($0) } ?? false } }

    deinit { cancel() }
}

/// The connection-event handler, kept alive for libnats' callbacks.
private final class EventBox: Sendable {
    private let onEvent: @Sendable (NATSConnection.ConnectionEvent) -> Void
    /// Set by `close()`: the disconnection a close makes is not reported.
    let closing = Atomic<Bool>(false)
    init(_ handler: @escaping @Sendable (NATSConnection.ConnectionEvent) -> Void) { onEvent = handler }
    func handler(_ event: NATSConnection.ConnectionEvent) {
        if !closing.load(ordering: .acquiring) { onEvent(event) }
    }
}
