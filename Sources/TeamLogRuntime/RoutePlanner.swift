public import TeamLog

/// Decides, for each input line, which partitions get it and in what form (`teamlog route`); the
/// transport (NATS) only publishes what it plans. No I/O here but the optional `locate` callback.
///
/// - A line that parses goes where its `PartitionKey` says: one partition, or every one for
///   `client.login`, `client.logout` and `clock.tick`.
/// - A line without `ts` gets the router's clock (`now`) written into it, so every partition that
///   receives a broadcast op, and every partition after a re-delivery, sees the same event time.
/// - A line that does not parse (bad JSON, unknown op, a missing field…) still goes to a partition —
///   partition 0 — and is answered `rejected` there with its code: nothing is dropped silently.
/// - `message.modify` goes to the partition holding its message: the planner remembers where the last
///   `recentCapacity` sent messages went; an older one is looked up with `locate` (the NATS router asks
///   each partition's `message` query); a message nobody holds goes to
///   `PartitionKey.fallbackPartition`, which rejects it as `noSuchMessage` once.
/// - The publish id (`Nats-Msg-Id`) is the op's `opId`, so a router re-run over the same input is
///   de-duplicated by the stream; a broadcast copy's id is `opId` `#` partition (a stream de-duplicates
///   ids across all its subjects). Lines without `opId` have none.
public struct RoutePlanner {
    /// One message to publish.
    public struct Planned: Sendable, Equatable {
        public var partition: Int
        /// The line as the partition receives it (`ts` added when it had none).
        public var data: [UInt8]
        /// The de-duplication id, if the op has an `opId`.
        public var msgId: String?
        /// The input line number (carried to the partition, whose records then name the router's lines).
        public var line: Int
        /// For a line over the limit, its length (`data` is empty).
        public var tooLongLength: Int? = nil

        public init(partition: Int, data: [UInt8], msgId: String?, line: Int, tooLongLength: Int? = nil) {
            self.partition = partition
            self.data = data
            self.msgId = msgId
            self.line = line
            self.tooLongLength = tooLongLength
        }
    }

    public let partitions: Int
    /// How keys map to partitions (the deployment's, recorded with its op stream).
    public let scheme: PartitionScheme
    /// How many recent `messageId → partition` pairs are remembered (bounded memory).
    public let recentCapacity: Int
    /// Finds the partition holding a message the planner no longer remembers; `nil`: none does. It throws
    /// when it cannot tell (a partition that does not answer may hold it): the op is not planned at all,
    /// rather than sent to the fallback partition, where it would be rejected `noSuchMessage` for good.
    public var locate: ((Id) throws -> Int?)?
    private var recent: [Id: Int] = [:]
    private var recentOrder: [Id] = []
    private var recentNext = 0

    public init(
        partitions: Int, scheme: PartitionScheme, recentCapacity: Int = 1 << 20, locate: ((Id) throws -> Int?)? = nil
    ) {
        precondition(partitions > 0, "a partition count is positive")
        self.partitions = partitions
        self.scheme = scheme
        self.recentCapacity = max(1, recentCapacity)
        self.locate = locate
    }

    /// Plans one input line; blank lines plan nothing.
    public mutating func plan(_ line: LineReader.Line, now: Int64) throws -> [Planned] {
        let parsed = ParsedLine.parse(line)
        guard let result = parsed.result else { return [] }
        let number: Int
        let bytes: [UInt8]
        switch line {
        case .text(let n, let b): (number, bytes) = (n, b)
        case .tooLong(let n, let length):
            // Not forwarded (a stream refuses messages that large): partition 0 gets its length and
            // answers `lineTooLong` as `ingest` does.
            return [Planned(partition: 0, data: [], msgId: nil, line: n, tooLongLength: length)]
        }
        switch result {
        case .failure:
            // Its opId when one could be read: a re-run of the router is then de-duplicated by the stream
            // for it too (without, partition 0 answered a second `rejected` record for it).
            return [Planned(partition: 0, data: bytes, msgId: parsed.opId?.string, line: number)]
        case .success(let op):
            let data = op.ts == nil ? Self.stamped(bytes, ts: now) : bytes
            switch PartitionKey.of(op) {
            case .key(let key):
                let p = PartitionKey.partition(of: key, count: partitions, scheme: scheme)
                if case .messageSend(let m) = op.body { remember(m.messageId, p) }
                return [Planned(partition: p, data: data, msgId: op.opId?.string, line: number)]
            case .broadcast:
                return (0..<partitions).map { p in
                    Planned(partition: p, data: data, msgId: op.opId.map { "\($0.string)#\(p)" }, line: number)
                }
            case .byMessage(let messageId):
                let p =
                    try recent[messageId] ?? locate?(messageId)
                    ?? PartitionKey.fallbackPartition(of: messageId, count: partitions, scheme: scheme)
                return [Planned(partition: p, data: data, msgId: op.opId?.string, line: number)]
            }
        }
    }

    /// `bytes` (a JSON object that parsed as an op without `ts`) with `"ts":now` as its first field.
    static func stamped(_ bytes: [UInt8], ts: Int64) -> [UInt8] {
        guard let open = bytes.firstIndex(of: 0x7B) else { return bytes }
        var out = Array(bytes[...open])
        out += Array("\"ts\":\(ts),".utf8)
        out += bytes[(open + 1)...]
        return out
    }

    private mutating func remember(_ messageId: Id, _ partition: Int) {
        if recent.updateValue(partition, forKey: messageId) != nil { return }
        if recentOrder.count < recentCapacity {
            recentOrder.append(messageId)
        } else {
            recent[recentOrder[recentNext]] = nil
            recentOrder[recentNext] = messageId
            recentNext = (recentNext + 1) % recentCapacity
        }
    }
}
