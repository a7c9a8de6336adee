import TeamLog

/// Merges the logs of a NATS deployment's partitions (`teamlog log` of each partition's store) into one
/// stream of ops that `teamlog route` sends to a new deployment with another partition count: the
/// re-partitioning that a live deployment cannot do (a key's partition is its hash modulo the count).
///
/// What a new deployment needs of the merged stream is what each old partition saw:
/// - **a key's ops in their order.** Each key (a team, a p2p pair, a channel) lived in one partition, so
///   every op of it is in one log, in its order; the merge keeps every log's own order;
/// - **presence and time around them.** `client.login`, `client.logout` and `clock.tick` went to every
///   partition (`PartitionKey.broadcast`): each log holds every one of them, in the same
///   order, between its own keyed ops. The merge takes each such op **once**, after every log's ops
///   before it and before every log's ops after it — so each key's ops meet the presence and time they
///   met, and a broadcast op becomes the point where the logs are lined up. The copies must be the same op
///   (all fields but `ts`: each partition raised it to its own last event's time, SPEC §ts); the copy
///   with the earliest `ts` is written. A log that disagrees is not an export of the same deployment (or
///   one partition refused an op the others took): the merge stops there, naming both lines;
/// - **time that does not go backwards.** Between two broadcast ops the logs' keyed ops are merged by
///   `ts` (a log's events never go back in time), ties in the order the logs were given.
///
/// A log that ends early (exported at another moment) takes no part in what follows its end. Memory is
/// one line per log.
public struct PartitionLogMerger {
    /// One log: where its next line comes from (`nil` at its end), and its name for messages.
    public struct Source {
        public var name: String
        public var next: () throws -> [UInt8]?

        public init(name: String, next: @escaping () throws -> [UInt8]?) {
            self.name = name
            self.next = next
        }
    }

    /// A line that cannot be merged: not an op, or broadcast copies that differ.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// What the merge did.
    public struct Counts: Equatable, Sendable {
        /// Lines written.
        public var written = 0
        /// Lines read from each log.
        public var read: [Int]
        /// Broadcast ops written (each once, for all the copies read).
        public var broadcasts = 0
        /// `message.read` ops written with an `upTo`: a seq of their old partition, which names another
        /// position in the new deployment's numbering.
        public var readsWithUpTo = 0
    }

    private struct Head {
        var line: [UInt8]
        var op: Op
        var ts: Int64
        var number: Int
        var isBroadcast: Bool
    }

    private var sources: [Source]
    private var heads: [Head?]
    public private(set) var counts: Counts

    public init(_ sources: [Source]) throws {
        self.sources = sources
        heads = Array(repeating: nil, count: sources.count)
        counts = Counts(read: Array(repeating: 0, count: sources.count))
        for i in sources.indices { try advance(i) }
    }

    /// The next line of the merged stream, `nil` when every log has ended.
    public mutating func next() throws -> [UInt8]? {
        // A keyed op: the earliest among the logs not waiting at a broadcast op.
        var pick: Int?
        for (i, head) in heads.enumerated() {
            guard let head, !head.isBroadcast else { continue }
            if let p = pick, heads[p]!.ts <= head.ts { continue }
            pick = i
        }
        if let pick {
            let line = heads[pick]!.line
            if heads[pick]!.op.readsUpToASeq { counts.readsWithUpTo += 1 }
            try advance(pick)
            counts.written += 1
            return line
        }
        // Every log that has not ended waits at a broadcast op: the same one, taken once.
        let waiting = heads.indices.filter { heads[$0] != nil }
        guard let first = waiting.first else { return nil }
        var earliest = first
        for i in waiting.dropFirst() {
            if Self.sameOp(heads[i]!.op, heads[first]!.op) == false {
                throw Failure(
                    description: "\(sources[first].name) line \(heads[first]!.number) (\(Self.describe(heads[first]!.op))) and "
                        + "\(sources[i].name) line \(heads[i]!.number) (\(Self.describe(heads[i]!.op))) should be the same "
                        + "op sent to every partition: these are not the logs of one deployment, or one partition "
                        + "refused an op the others took")
            }
            if heads[i]!.ts < heads[earliest]!.ts { earliest = i }
        }
        let line = heads[earliest]!.line
        for i in waiting { try advance(i) }
        counts.written += 1
        counts.broadcasts += 1
        return line
    }

    private mutating func advance(_ i: Int) throws {
        guard let line = try sources[i].next() else {
            heads[i] = nil
            return
        }
        counts.read[i] += 1
        let number = counts.read[i]
        let op: Op
        do {
            op = try OpParser.parse(JSONParser.parse(line)).get()
        } catch {
            throw Failure(description: "\(sources[i].name) line \(number) is not an op (\(error)): give `teamlog log` exports")
        }
        guard let ts = op.ts else {
            throw Failure(description: "\(sources[i].name) line \(number) has no ts: give `teamlog log` exports, which carry every event's time")
        }
        heads[i] = Head(line: line, op: op, ts: ts, number: number, isBroadcast: Self.linesUp(op))
    }

    /// Whether `op` is one the logs are lined up at: an op sent to every partition, but a `clock.tick`
    /// without an `opId` — what `teamlog log` writes for a partition's own members sync (a channel's,
    /// so in one log only), and an input tick the router could give no id. Such a tick is merged by its
    /// time like a keyed op; a tick the router sent everywhere is then written once per log, and every
    /// copy after the first advances the new deployment's time to a time it has already reached.
    static func linesUp(_ op: Op) -> Bool {
        guard PartitionKey.of(op) == .broadcast else { return false }
        if case .clockTick = op.body, op.opId == nil { return false }
        return true
    }

    /// Whether two broadcast copies are one op: every field but `ts`.
    private static func sameOp(_ a: Op, _ b: Op) -> Bool {
        var a = a
        var b = b
        a.ts = nil
        b.ts = nil
        return a == b
    }

    private static func describe(_ op: Op) -> String {
        var text = "\(op.body.name) by \(op.actor)"
        if let opId = op.opId { text += ", opId \(opId)" }
        return text
    }
}
