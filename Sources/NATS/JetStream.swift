import TeamLogThreads
internal import CNATS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Design:
// - `JetStream` owns a `jsCtx` (destroyed in `deinit`) and holds its connection. Every API call and
//   synchronous publish is bounded by the context's timeout; stream and stored-message lookups map "not
//   found" to `false`/`nil` rather than errors.
// - Asynchronous publishes (`publishAsync`) are tracked by libnats; failures (server errors, or no ack in
//   time) arrive on a library thread through the context's error handler, which records them in a sink.
//   `waitForPublishes` waits for every ack (`js_PublishAsyncComplete`) and then throws the recorded
//   failures (code `.publishFailed`, the first one's text, how many). The sink is retained by the C
//   context; it is released in `deinit` only when no publish can still be in flight (after a successful
//   `waitForPublishes`), else it is deliberately leaked (a few bytes) rather than freed under a late
//   callback.
// - Pull consumers are durable and created explicitly (`js_AddConsumer`) when absent, then bound to by
//   name, so destroying or recreating the subscription never deletes the consumer: what was acked stays
//   acked, what was not is redelivered after `ackWait`. Fetching sends the pull requests itself over a
//   plain subscription (not libnats' `natsSubscription_Fetch`, which can write past its batch array).
//   Acks publish "+ACK" to the delivery's reply subject on the same connection as the fetches, so a later
//   fetch is always processed after them.

/// A JetStream context: streams, publishing with acknowledgements, pull consumers and stored messages.
public final class JetStream: @unchecked Sendable {
    /// A stream to create when absent.
    public struct StreamConfig: Sendable {
        /// The stream's name.
        public var name: String
        /// The subjects it stores (wildcards allowed).
        public var subjects: [String]
        /// How many servers keep a copy (1, 3 or 5 in a cluster).
        public var replicas = 1
        /// How long a `msgId` is remembered for de-duplication, in seconds.
        public var duplicateWindowSeconds = 120
        /// File storage (survives restarts) or memory storage.
        public var fileStorage = true
        /// The stream's description (kept by the server with its configuration).
        public var description: String?

        /// A stream named `name` over `subjects`, with the defaults above.
        public init(name: String, subjects: [String]) {
            self.name = name
            self.subjects = subjects
        }
    }

    /// The server's acknowledgement of a stored message.
    public struct PubAck: Sendable, Equatable {
        /// The stream that stored it.
        public var stream: String
        /// Its sequence in the stream (the original one when `duplicate`).
        public var sequence: UInt64
        /// Whether the server recognized the `msgId` and did not store it again.
        public var duplicate: Bool

        /// An acknowledgement with these fields (for comparisons in tests).
        public init(stream: String, sequence: UInt64, duplicate: Bool) {
            self.stream = stream
            self.sequence = sequence
            self.duplicate = duplicate
        }
    }

    /// A stream's current contents.
    public struct StreamState: Sendable, Equatable {
        /// Messages stored.
        public var messages: UInt64
        /// Bytes stored.
        public var bytes: UInt64
        /// The first stored sequence (0 when empty).
        public var firstSequence: UInt64
        /// The last sequence assigned (0 when nothing was ever stored).
        public var lastSequence: UInt64
        /// How many consumers it has.
        public var consumers: Int
        /// The server name of the stream's leader in a cluster (`nil` on a single server or while none).
        public var leader: String?
        /// The description in its configuration, if it has one.
        public var description: String? = nil
        /// How many servers keep a copy.
        public var replicas = 1
    }

    /// The connection this context publishes and subscribes on.
    public let connection: NATSConnection
    let ctx: OpaquePointer
    private let sink: Unmanaged<AsyncErrorSink>
    private let state = Monitor()
    private var asyncInFlight = false
    /// The timeout of every JetStream API call, in milliseconds.
    public let timeoutMs: Int

    init(connection: NATSConnection, timeoutMs: Int, maxPendingAsync: Int) throws {
        self.connection = connection
        self.timeoutMs = timeoutMs
        var opts = jsOptions()
        try check(jsOptions_Init(&opts), "jsOptions_Init")
        opts.Wait = Int64(timeoutMs)
        opts.PublishAsync.MaxPending = Int64(maxPendingAsync)
        opts.PublishAsync.StallWait = Int64(timeoutMs)
        let sink = Unmanaged.passRetained(AsyncErrorSink())
        // The ack handler (not the error-only handler), so duplicates are counted too. It owns the message.
        opts.PublishAsync.AckHandlerClosure = sink.toOpaque()
        opts.PublishAsync.AckHandler = { _, msg, pa, pae, closure in
            defer { if let msg { natsMsg_Destroy(msg) } }
            guard let closure else { return }
            let sink = Unmanaged<AsyncErrorSink>.fromOpaque(closure).takeUnretainedValue()
            if let pae {
                let subject = msg.flatMap { natsMsg_GetSubject($0).map { String(cString: $0) } } ?? "?"
                let text = pae.pointee.ErrText.map { String(cString: $0) } ?? ""
                var error = NATSError.from(pae.pointee.Err, "js_PublishAsync \(subject)", jsCode: pae.pointee.ErrCode)
                if !text.isEmpty { error.message = text }
                sink.record(error)
            } else if let pa, pa.pointee.Duplicate {
                sink.duplicate()
            }
        }
        var handle: OpaquePointer?
        let status = natsConnection_JetStream(&handle, connection.nc, &opts)
        guard status == NATS_OK, let handle else {
            sink.release()
            throw NATSError.from(status, "natsConnection_JetStream")
        }
        ctx = handle
        self.sink = sink
    }

    deinit {
        jsCtx_Destroy(ctx)
        if !asyncInFlight { sink.release() }
    }

    // MARK: Streams

    /// Creates the stream when absent; leaves an existing one as it is (returns whether it created it).
    @discardableResult
    public func ensureStream(_ config: StreamConfig) throws -> Bool {
        if try streamState(config.name) != nil { return false }
        let arena = CStringArena()
        var cfg = jsStreamConfig()
        try check(jsStreamConfig_Init(&cfg), "jsStreamConfig_Init")
        cfg.Name = arena(config.name)
        var subjects: [UnsafePointer<CChar>?] = config.subjects.map { arena($0) }
        cfg.SubjectsLen = Int32(subjects.count)
        cfg.Replicas = Int64(config.replicas)
        cfg.Duplicates = Int64(config.duplicateWindowSeconds) * 1_000_000_000
        cfg.Storage = config.fileStorage ? js_FileStorage : js_MemoryStorage
        if let description = config.description { cfg.Description = arena(description) }
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var jsCode = jsErrCode(rawValue: 0)
        let status = subjects.withUnsafeMutableBufferPointer { buffer in
            cfg.Subjects = buffer.baseAddress
            return js_AddStream(&info, ctx, &cfg, nil, &jsCode)
        }
        withExtendedLifetime(arena) {}
        if let info { jsStreamInfo_Destroy(info) }
        if status != NATS_OK && jsCode == JSStreamNameExistErr { return false }  // created concurrently
        try check(status, jsCode, "js_AddStream \(config.name)")
        return true
    }

    /// The stream's state, or `nil` when there is no such stream.
    public func streamState(_ stream: String) throws -> StreamState? {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var jsCode = jsErrCode(rawValue: 0)
        let status = js_GetStreamInfo(&info, ctx, stream, nil, &jsCode)
        if status == NATS_NOT_FOUND || jsCode == JSStreamNotFoundErr { return nil }
        try check(status, jsCode, "js_GetStreamInfo \(stream)")
        guard let info else { return nil }
        defer { jsStreamInfo_Destroy(info) }
        let s = info.pointee.State
        return StreamState(
            messages: s.Msgs, bytes: s.Bytes, firstSequence: s.FirstSeq, lastSequence: s.LastSeq,
            consumers: Int(s.Consumers),
            leader: info.pointee.Cluster?.pointee.Leader.flatMap { $0.pointee == 0 ? nil : String(cString: $0) },
            description: info.pointee.Config?.pointee.Description.flatMap { $0.pointee == 0 ? nil : String(cString: $0) },
            replicas: Int(info.pointee.Config?.pointee.Replicas ?? 1))
    }

    /// The last sequence stored in `stream` (0 when empty); `.notFound` when there is no such stream.
    public func streamLastSequence(_ stream: String) throws -> UInt64 {
        guard let state = try streamState(stream) else {
            throw NATSError(code: .notFound, message: "stream not found", context: "js_GetStreamInfo \(stream)")
        }
        return state.lastSequence
    }

    /// Deletes the stream and everything in it; `.notFound` when there is no such stream.
    public func deleteStream(_ name: String) throws {
        var jsCode = jsErrCode(rawValue: 0)
        try check(js_DeleteStream(ctx, name, nil, &jsCode), jsCode, "js_DeleteStream \(name)")
    }

    // MARK: Publishing

    /// Publishes to JetStream and waits for the stored acknowledgement. With `msgId`, a repeat within the
    /// stream's duplicate window is not stored again (`duplicate` is true and `sequence` the original's).
    public func publish(
        _ subject: String, _ data: [UInt8], msgId: String? = nil, headers: [(String, String)] = [],
        timeoutMs: Int = 5_000
    ) throws -> PubAck {
        let arena = CStringArena()
        var opts = jsPubOptions()
        try check(jsPubOptions_Init(&opts), "jsPubOptions_Init")
        opts.MaxWait = Int64(timeoutMs)
        opts.MsgId = arena.optional(msgId)
        var ack: UnsafeMutablePointer<jsPubAck>?
        var jsCode = jsErrCode(rawValue: 0)
        let status: natsStatus
        if headers.isEmpty {
            status = data.withUnsafeBytes {
                js_Publish(&ack, ctx, subject, $0.baseAddress, Int32($0.count), &opts, &jsCode)
            }
        } else {
            let msg = try makeMessage(subject, data, headers: headers)
            defer { natsMsg_Destroy(msg) }
            status = js_PublishMsg(&ack, ctx, msg, &opts, &jsCode)
        }
        withExtendedLifetime(arena) {}
        try check(status, jsCode, "js_Publish \(subject)")
        guard let ack else {
            throw NATSError(code: .illegalState, message: "no acknowledgement", context: "js_Publish \(subject)")
        }
        defer { jsPubAck_Destroy(ack) }
        return PubAck(
            stream: ack.pointee.Stream.map { String(cString: $0) } ?? "", sequence: ack.pointee.Sequence,
            duplicate: ack.pointee.Duplicate)
    }

    /// Queues a JetStream publish without waiting for its acknowledgement (waits only when
    /// `maxPendingAsync` publishes are in flight). Failures surface in `waitForPublishes`.
    public func publishAsync(
        _ subject: String, _ data: [UInt8], msgId: String? = nil, headers: [(String, String)] = []
    ) throws {
        state.locked { asyncInFlight = true }
        let arena = CStringArena()
        var opts = jsPubOptions()
        try check(jsPubOptions_Init(&opts), "jsPubOptions_Init")
        opts.MsgId = arena.optional(msgId)
        var msg: OpaquePointer? = try makeMessage(subject, data, headers: headers)
        // On success the library takes the message and clears `msg`; destroying nil is a no-op.
        defer { natsMsg_Destroy(msg) }
        let status = js_PublishMsgAsync(ctx, &msg, &opts)
        withExtendedLifetime(arena) {}
        try check(status, "js_PublishMsgAsync \(subject)")
    }

    /// How many asynchronous publishes since the last call the stream acknowledged as duplicates (a
    /// `msgId` it already had within its duplicate window: not stored again).
    public func takeDuplicates() -> Int { sink.takeUnretainedValue().takeDuplicates() }

    /// Waits up to `timeoutMs` until every `publishAsync` so far is acknowledged, then throws the failures
    /// recorded meanwhile (`.publishFailed`), or `.timeout` when acks are still missing.
    public func waitForPublishes(timeoutMs: Int) throws {
        var opts = jsPubOptions()
        try check(jsPubOptions_Init(&opts), "jsPubOptions_Init")
        opts.MaxWait = Int64(timeoutMs)
        let status = js_PublishAsyncComplete(ctx, &opts)
        if status == NATS_OK { state.locked { asyncInFlight = false } }
        if status == NATS_TIMEOUT {
            // Publishes whose acks did not come in time (their server died, a leader moved) would stay in
            // libnats' pending list forever and make every later wait time out too: take them back and
            // drop them. The caller publishes again under the same message ids; the stream de-duplicates.
            var pending = natsMsgList()
            if js_PublishAsyncGetPendingList(&pending, ctx) == NATS_OK { natsMsgList_Destroy(&pending) }
        }
        let failures = sink.takeUnretainedValue().take()
        if let first = failures.first {
            throw NATSError(
                code: .publishFailed,
                message: "\(failures.count) asynchronous publish(es) failed; the first: \(first.description)",
                context: "js_PublishAsyncComplete", jetStreamCode: first.jetStreamCode)
        }
        try check(status, "js_PublishAsyncComplete")
    }

    // MARK: Consuming

    /// A durable pull consumer on `stream` filtered to `subject` (created if absent), ack policy explicit.
    ///
    /// An existing consumer is bound as it is (its configuration is not changed). `startSequence` applies
    /// only when the consumer is created; without it delivery starts at the stream's first message.
    public func pullSubscribe(
        stream: String, subject: String, durable: String, startSequence: UInt64? = nil, ackWaitMs: Int = 30_000,
        maxAckPending: Int = 20_000
    ) throws -> PullSubscription {
        var jsCode = jsErrCode(rawValue: 0)
        var info: UnsafeMutablePointer<jsConsumerInfo>?
        let lookup = js_GetConsumerInfo(&info, ctx, stream, durable, nil, &jsCode)
        if let info { jsConsumerInfo_Destroy(info) }
        info = nil
        if lookup == NATS_NOT_FOUND || jsCode == JSConsumerNotFoundErr {
            let arena = CStringArena()
            var cfg = jsConsumerConfig()
            try check(jsConsumerConfig_Init(&cfg), "jsConsumerConfig_Init")
            cfg.Durable = arena(durable)
            cfg.FilterSubject = arena(subject)
            cfg.AckPolicy = js_AckExplicit
            cfg.AckWait = Int64(ackWaitMs) * 1_000_000
            cfg.MaxAckPending = Int64(maxAckPending)
            if let startSequence {
                cfg.DeliverPolicy = js_DeliverByStartSequence
                cfg.OptStartSeq = startSequence
            }
            jsCode = jsErrCode(rawValue: 0)
            let status = js_AddConsumer(&info, ctx, stream, &cfg, nil, &jsCode)
            withExtendedLifetime(arena) {}
            if let info { jsConsumerInfo_Destroy(info) }
            // Another process may have created it between the lookup and here: bind to theirs.
            if !(status != NATS_OK && jsCode == JSConsumerNameExistErr) {
                try check(status, jsCode, "js_AddConsumer \(stream)/\(durable)")
            }
        } else {
            try check(lookup, jsCode, "js_GetConsumerInfo \(stream)/\(durable)")
        }
        // Bound with a plain subscription on an inbox of our own, not `js_PullSubscribe`: libnats 3.4's
        // `natsSubscription_Fetch` overruns its batch array (see `PullSubscription`).
        var inbox: UnsafeMutablePointer<CChar>?
        try check(natsInbox_Create(&inbox), "natsInbox_Create")
        guard let inbox else {
            throw NATSError(code: .illegalState, message: "no inbox", context: "natsInbox_Create")
        }
        let prefix = String(cString: inbox) + "."
        natsInbox_Destroy(inbox)
        var sub: OpaquePointer?
        try check(
            natsConnection_SubscribeSync(&sub, connection.nc, prefix + "*"), "natsConnection_SubscribeSync \(durable)")
        guard let sub else {
            throw NATSError(code: .illegalState, message: "no subscription", context: "pullSubscribe \(durable)")
        }
        return PullSubscription(jetStream: self, sub: sub, inboxPrefix: prefix, stream: stream, durable: durable)
    }

    /// Deletes a consumer (e.g. a durable no longer wanted); `.notFound` when absent.
    public func deleteConsumer(stream: String, durable: String) throws {
        var jsCode = jsErrCode(rawValue: 0)
        try check(js_DeleteConsumer(ctx, stream, durable, nil, &jsCode), jsCode, "js_DeleteConsumer \(durable)")
    }

    /// The last stored message on `subject` (no wildcards; nil if none).
    public func lastMessage(stream: String, subject: String) throws -> NATSMessage? {
        try stored(stream, "js_GetLastMsg \(stream) \(subject)") { msg, code in
            js_GetLastMsg(&msg, ctx, stream, subject, nil, &code)
        }
    }

    /// Reads one stored message by stream sequence (nil if none), for tests and tools.
    public func message(stream: String, sequence: UInt64) throws -> NATSMessage? {
        var message = try stored(stream, "js_GetMsg \(stream) #\(sequence)") { msg, code in
            js_GetMsg(&msg, ctx, stream, sequence, nil, &code)
        }
        if message != nil && message?.streamSequence == nil { message?.streamSequence = sequence }
        return message
    }

    /// A stored message a `js_Get…Msg` call reads (nil when the stream has none such).
    private func stored(
        _ stream: String, _ context: @autoclosure () -> String,
        _ get: (inout OpaquePointer?, inout jsErrCode) -> natsStatus
    ) throws -> NATSMessage? {
        var msg: OpaquePointer?
        var jsCode = jsErrCode(rawValue: 0)
        let status = get(&msg, &jsCode)
        if status == NATS_NOT_FOUND || jsCode == JSNoMessageFoundErr {
            if let msg { natsMsg_Destroy(msg) }
            return nil
        }
        try check(status, jsCode, context())
        guard let msg else { return nil }
        defer { natsMsg_Destroy(msg) }
        return NATSMessage(copying: msg, stream: stream, stored: true)
    }
}

/// Failures of asynchronous publishes, recorded on library threads until `waitForPublishes` takes them,
/// and how many acknowledgements said "duplicate", until `takeDuplicates`.
private final class AsyncErrorSink: @unchecked Sendable {
    private let lock = Monitor()
    private var failures: [NATSError] = []
    private var duplicates = 0

    func record(_ error: NATSError) { lock.locked { failures.append(error) } }

    func duplicate() { lock.locked { duplicates += 1 } }

    func takeDuplicates() -> Int {
        lock.locked {
            defer { duplicates = 0 }
            return duplicates
        }
    }

    func take() -> [NATSError] {
        lock.locked {
            defer { failures = [] }
            return failures
        }
    }
}

/// A bound durable pull consumer: `fetch` batches, `ack` each processed message.
///
/// Destroying it (or its process dying) leaves the consumer on the server: a new subscription with the
/// same durable name continues where acks left off.
///
/// Fetching is done here, over a plain subscription on an inbox of its own, and not with libnats 3.4's
/// `natsSubscription_Fetch`: that one first takes the deliveries already queued (those of an earlier fetch
/// that gave up before they arrived), asks the server for `batch - taken` more, then loops until it holds
/// exactly `batch - taken` messages — a count it has already passed when more than half a batch was
/// queued, so it keeps appending every later delivery past the end of its `batch`-sized array: heap
/// corruption (`malloc(): smallbin double linked list corrupted`) in loaded partitions whose fetch thread
/// ran late. Here a fetch never holds more than `batch` messages; deliveries beyond it stay queued for the
/// next one (they are the consumer's, counted in its ack pending).
public final class PullSubscription: @unchecked Sendable {
    private let jetStream: JetStream
    private let lock = Monitor()
    private var sub: OpaquePointer?
    /// `<inbox>.`: each pull request's reply subject is this plus its number, so late status messages of
    /// an earlier request are told apart from the current one's.
    private let inboxPrefix: String
    private let requestSubject: String
    private var requests: UInt64 = 0
    /// The stream consumed.
    public let stream: String
    /// The durable consumer's name.
    public let durable: String

    init(jetStream: JetStream, sub: OpaquePointer, inboxPrefix: String, stream: String, durable: String) {
        self.jetStream = jetStream
        self.sub = sub
        self.inboxPrefix = inboxPrefix
        self.requestSubject = "$JS.API.CONSUMER.MSG.NEXT.\(stream).\(durable)"
        self.stream = stream
        self.durable = durable
    }

    deinit {
        if let sub {
            _ = natsSubscription_Unsubscribe(sub)
            natsSubscription_Destroy(sub)
        }
    }

    /// Up to `batch` messages (never more); an empty array when none arrived within `timeoutMs` (a timeout
    /// is not an error). Calls are serialized.
    public func fetch(batch: Int, timeoutMs: Int) throws -> [NATSMessage] {
        precondition(batch > 0 && timeoutMs > 0, "fetch needs a positive batch and timeout")
        return try lock.locked {
            guard let sub else {
                throw NATSError(code: .illegalState, message: "subscription closed", context: "fetch \(durable)")
            }
            var messages: [NATSMessage] = []
            // Deliveries already queued (left by an earlier fetch that gave up), without waiting.
            // Statuses among them answered earlier requests: dropped.
            while messages.count < batch {
                let event: Delivery?
                do { event = try next(sub, timeoutMs: 0) } catch let error where !messages.isEmpty {
                    _ = error  // what came so far is returned; the next fetch meets the error again
                    return messages
                }
                guard let event else { break }
                if case .message(let message) = event { messages.append(message) }
            }
            if messages.count == batch { return messages }
            // Ask for the rest: first without waiting (the server answers 404 when it has nothing), then, if
            // nothing came, waiting until the deadline, as libnats' own fetch does.
            let deadline = MonotonicClock.milliseconds() + Int64(timeoutMs)
            var noWait = batch - messages.count > 1
            var reply = try request(batch - messages.count, timeoutMs: timeoutMs, noWait: noWait)
            while messages.count < batch {
                let remaining = Int(deadline - MonotonicClock.milliseconds())
                if remaining <= 0 { break }
                let event: Delivery?
                do { event = try next(sub, timeoutMs: remaining) } catch let error where !messages.isEmpty {
                    _ = error  // what came so far is returned; the next fetch meets the error again
                    break
                }
                guard let event else { break }
                switch event {
                case .message(let message):
                    messages.append(message)
                case .status(let subject, let code, let description):
                    if subject != reply || code == "100" { continue }  // an earlier request's, or a heartbeat
                    if code == "404" && noWait && messages.isEmpty {
                        noWait = false
                        reply = try request(batch, timeoutMs: max(remaining, 1), noWait: false)
                        continue
                    }
                    if code == "404" || code == "408" || !messages.isEmpty { return messages }
                    throw NATSError(
                        code: .illegalState, message: "pull request answered \(code) \(description)",
                        context: "fetch \(stream)/\(durable)")
                }
            }
            return messages
        }
    }

    /// What a pull subscription's inbox receives: a delivery, or a status of one of its requests.
    private enum Delivery {
        case message(NATSMessage)
        case status(subject: String, code: String, description: String)
    }

    /// The next message on the inbox within `timeoutMs` (0: only one already queued), `nil` on timeout.
    private func next(_ sub: OpaquePointer, timeoutMs: Int) throws -> Delivery? {
        var msg: OpaquePointer?
        let status = natsSubscription_NextMsg(&msg, sub, Int64(timeoutMs))
        if status == NATS_TIMEOUT { return nil }
        try check(status, "natsSubscription_NextMsg \(stream)/\(durable)")
        guard let msg else { return nil }
        defer { natsMsg_Destroy(msg) }
        if natsMsg_GetDataLength(msg) == 0 {
            var code: UnsafePointer<CChar>?
            if natsMsgHeader_Get(msg, "Status", &code) == NATS_OK, let code {
                var description: UnsafePointer<CChar>?
                _ = natsMsgHeader_Get(msg, "Description", &description)
                return .status(
                    subject: natsMsg_GetSubject(msg).map { String(cString: $0) } ?? "",
                    code: String(cString: code), description: description.map { String(cString: $0) } ?? "")
            }
        }
        return .message(NATSMessage(copying: msg, jetStream: true))
    }

    /// Sends a pull request for `count` messages, expiring a little before `timeoutMs` (as libnats does);
    /// returns its reply subject.
    private func request(_ count: Int, timeoutMs: Int, noWait: Bool) throws -> String {
        requests += 1
        let reply = inboxPrefix + String(requests)
        let expiresMs = timeoutMs >= 20 ? timeoutMs - 10 : timeoutMs
        var body = "{\"batch\":\(count),\"expires\":\(Int64(expiresMs) * 1_000_000)"
        if noWait { body += ",\"no_wait\":true" }
        body += "}"
        try jetStream.connection.publish(requestSubject, reply: reply, Array(body.utf8))
        return reply
    }

    /// Acknowledges a fetched message (publishes "+ACK" to its reply subject; `.invalidArgument` for a
    /// message that did not come from a JetStream consumer).
    public func ack(_ message: NATSMessage) throws { try reply(message, "+ACK") }

    /// Acknowledges and waits up to `timeoutMs` for the server to confirm it processed the ack.
    public func ackSync(_ message: NATSMessage, timeoutMs: Int = 5_000) throws {
        guard let reply = message.reply else { throw Self.notJetStream(message, "ackSync") }
        _ = try jetStream.connection.request(reply, Array("+ACK".utf8), timeoutMs: timeoutMs)
    }

    /// Asks for redelivery now instead of after the ack wait.
    public func nak(_ message: NATSMessage) throws { try reply(message, "-NAK") }

    /// Resets the ack wait of a message still being processed.
    public func inProgress(_ message: NATSMessage) throws { try reply(message, "+WPI") }

    /// Tells the server never to redeliver this message.
    public func terminate(_ message: NATSMessage) throws { try reply(message, "+TERM") }

    private func reply(_ message: NATSMessage, _ verb: String) throws {
        guard let reply = message.reply else { throw Self.notJetStream(message, verb) }
        try jetStream.connection.publish(reply, Array(verb.utf8))
    }

    private static func notJetStream(_ message: NATSMessage, _ verb: String) -> NATSError {
        NATSError(
            code: .invalidArgument, message: "not a JetStream delivery (no reply subject)",
            context: "\(verb) \(message.subject)")
    }
}
