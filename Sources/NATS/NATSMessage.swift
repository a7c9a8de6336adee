internal import CNATS

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Design: a message is a plain value. Every received `natsMsg` is copied into a `NATSMessage` (subject,
// reply, payload, headers and, for JetStream deliveries, the metadata parsed from the reply subject) and
// destroyed at once, so no C object outlives the call that received it. JetStream acks need nothing more:
// acking is publishing "+ACK" to the delivery's reply subject (what `natsMsg_Ack` does too), so
// `PullSubscription.ack` works from the value alone.

/// A message received from NATS (or built to be sent), copied out of the C client.
public struct NATSMessage: Sendable, Equatable {
    /// The subject it was published on.
    public var subject: String
    /// The reply subject (the inbox of a request, or the ack subject of a JetStream delivery).
    public var reply: String?
    /// The payload.
    public var data: [UInt8]
    /// Headers, each name with its values in order (NATS headers may repeat).
    public var headers: [String: [String]]
    /// The message's sequence in its stream, for JetStream deliveries and stored messages.
    public var streamSequence: UInt64?
    /// The consumer's delivery sequence, for JetStream deliveries.
    public var consumerSequence: UInt64?
    /// How many times JetStream delivered it (1 on first delivery), for JetStream deliveries.
    public var deliveredCount: UInt64?
    /// Messages still pending for the consumer after this one, for JetStream deliveries.
    public var pendingCount: UInt64?
    /// The stream it came from, for JetStream deliveries and stored messages.
    public var stream: String?

    /// A message with the given fields and no JetStream metadata.
    public init(subject: String, reply: String? = nil, data: [UInt8], headers: [String: [String]] = [:]) {
        self.subject = subject
        self.reply = reply
        self.data = data
        self.headers = headers
    }

    /// The first value of header `name`, if any.
    public func header(_ name: String) -> String? { headers[name]?.first }

    /// Copies `msg` (which the caller still owns and destroys). With `jetStream`, also reads the delivery
    /// metadata; with `stored`, the stored sequence of a `js_GetMsg` result.
    init(copying msg: OpaquePointer, jetStream: Bool = false, stream: String? = nil, stored: Bool = false) {
        subject = natsMsg_GetSubject(msg).map { String(cString: $0) } ?? ""
        reply = natsMsg_GetReply(msg).flatMap { $0.pointee == 0 ? nil : String(cString: $0) }
        let length = Int(natsMsg_GetDataLength(msg))
        if length > 0, let bytes = natsMsg_GetData(msg) {
            data = bytes.withMemoryRebound(to: UInt8.self, capacity: length) {
                Array(UnsafeBufferPointer(start: $0, count: length))
            }
        } else {
            data = []
        }
        headers = Self.readHeaders(msg)
        self.stream = stream
        if stored {
            let seq = natsMsg_GetSequence(msg)
            streamSequence = seq == 0 ? nil : seq
        }
        if jetStream {
            var meta: UnsafeMutablePointer<jsMsgMetaData>?
            if natsMsg_GetMetaData(&meta, msg) == NATS_OK, let meta {
                streamSequence = meta.pointee.Sequence.Stream
                consumerSequence = meta.pointee.Sequence.Consumer
                deliveredCount = meta.pointee.NumDelivered
                pendingCount = meta.pointee.NumPending
                if let name = meta.pointee.Stream { self.stream = String(cString: name) }
                jsMsgMetaData_Destroy(meta)
            }
        }
    }

    /// Header names and values of `msg`; the arrays libnats returns are the caller's to free, the strings
    /// stay the message's.
    private static func readHeaders(_ msg: OpaquePointer) -> [String: [String]] {
        var keys: UnsafeMutablePointer<UnsafePointer<CChar>?>?
        var count: Int32 = 0
        guard natsMsgHeader_Keys(msg, &keys, &count) == NATS_OK, let keys else { return [:] }
        defer { free(keys) }
        var result: [String: [String]] = [:]
        for i in 0..<Int(count) {
            guard let key = keys[i] else { continue }
            var values: UnsafeMutablePointer<UnsafePointer<CChar>?>?
            var valueCount: Int32 = 0
            guard natsMsgHeader_Values(msg, key, &values, &valueCount) == NATS_OK, let values else { continue }
            defer { free(values) }
            result[String(cString: key)] = (0..<Int(valueCount)).compactMap { values[$0].map { String(cString: $0) } }
        }
        return result
    }
}

/// Builds a `natsMsg` with headers for a publish; the caller destroys it (or hands it to the library).
func makeMessage(_ subject: String, reply: String? = nil, _ data: [UInt8], headers: [(String, String)]) throws
    -> OpaquePointer
{
    var msg: OpaquePointer?
    let status = data.withUnsafeBytes { raw in
        natsMsg_Create(
            &msg, subject, reply, raw.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(raw.count))
    }
    try check(status, "natsMsg_Create \(subject)")
    guard let msg else { throw NATSError(code: .illegalState, message: "no message", context: "natsMsg_Create") }
    for (name, value) in headers {
        let status = natsMsgHeader_Add(msg, name, value)
        if status != NATS_OK {
            natsMsg_Destroy(msg)
            throw NATSError.from(status, "natsMsgHeader_Add \(name)")
        }
    }
    return msg
}
