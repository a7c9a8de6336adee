public import TeamLog
public import TeamLogStore
import TeamLogThreads

/// The SPEC §5 queries a transport answers (HTTP routes, NATS request subjects), and how each is read
/// from the stored projections and named when its id is unknown — one definition for every transport.
public enum QueryKind: String, Sendable, CaseIterable {
    case team, unread, receipts, message, channel

    /// The error code of an unknown id (`unread` always answers: a user with no conversation has none).
    public var missingCode: String {
        switch self {
        case .team: "noSuchTeam"
        case .unread: "noSuchUser"
        case .receipts, .message: "noSuchMessage"
        case .channel: "noSuchChannel"
        }
    }

    /// The error message of an unknown `id`.
    public func missingMessage(_ id: String) -> String {
        switch self {
        case .team: "no team \(id)"
        case .unread: ""
        case .receipts: "no receipt tally for \(id) (no such message, or sent without needReceipt)"
        case .message: "no message \(id)"
        case .channel: "no channel \(id)"
        }
    }

    /// The answer for `id` in one read snapshot of `store`'s projections; `nil` when unknown.
    public func view(_ store: Store, _ id: Id, in snapshot: ProjectionSnapshot) throws -> JSONValue? {
        switch self {
        case .team: try store.teamView(id, in: snapshot)
        case .unread: try store.unreadView(id, in: snapshot)
        case .receipts: try store.receiptsView(id, in: snapshot)
        case .message: try store.messageView(id, in: snapshot)
        case .channel: try store.channelView(id, in: snapshot)
        }
    }

    /// `unread` with, per conversation, the event time of its last message as `lastTs` (0 with none): what
    /// a merge of several partitions' answers orders by, since seqs of different logs do not compare.
    public static func unreadWithTimes(_ store: Store, _ user: Id, in snapshot: ProjectionSnapshot) throws
        -> JSONValue
    {
        let plain = try store.unreadView(user, in: snapshot)
        guard case .object(var fields) = plain, let i = fields.firstIndex(where: { $0.0 == "conversations" }),
            case .array(let conversations) = fields[i].1
        else { return plain }
        var timed: [JSONValue] = []
        for conversation in conversations {
            guard case .object(var pairs) = conversation else { continue }
            var ts: Int64 = 0
            if let id = conversation["lastMessage"]?["messageId"]?.stringValue,
                let message = try store.messageView(Id(id), in: snapshot), let t = message["ts"]?.intValue
            {
                ts = t
            }
            pairs.append(("lastTs", .int(ts)))
            timed.append(.object(pairs))
        }
        fields[i].1 = .array(timed)
        return .object(fields)
    }

    /// Merges per-partition `unreadWithTimes` answers into one SPEC §5 `unread` answer: the total is the
    /// sum; conversations are listed most recent first by their last message's event time (ties: by
    /// conversation, `{type,id}` order), `lastTs` removed. `lastReadSeq` and `lastMessage.seq` stay the
    /// seqs of the partition that owns the conversation.
    public static func mergeUnread(user: Id, _ answers: [JSONValue]) -> JSONValue {
        var total: Int64 = 0
        var rows: [(ts: Int64, to: (String, String), value: JSONValue)] = []
        for answer in answers {
            total += answer["total"]?.intValue ?? 0
            for conversation in answer["conversations"]?.arrayValue ?? [] {
                guard case .object(let pairs) = conversation else { continue }
                let ts = conversation["lastTs"]?.intValue ?? 0
                let to = (conversation["to"]?["type"]?.stringValue ?? "", conversation["to"]?["id"]?.stringValue ?? "")
                rows.append((ts, to, .object(pairs.filter { $0.0 != "lastTs" })))
            }
        }
        rows.sort { a, b in
            if a.ts != b.ts { return a.ts > b.ts }
            return Array(a.to.0.utf8).lexicographicallyPrecedes(Array(b.to.0.utf8))
                || (a.to.0 == b.to.0 && Array(a.to.1.utf8).lexicographicallyPrecedes(Array(b.to.1.utf8)))
        }
        return .object([
            ("user", .string(user.string)), ("total", .int(total)), ("conversations", .array(rows.map(\.value))),
        ])
    }
}

extension WriterService {
    /// Answers a query from the live state on the calling thread: one snapshot of the projections with
    /// every op committed before the call (read your writes), without waiting for a checkpoint
    /// (`Store.readCommitted`). `body` reads it.
    public func answer<R>(_ body: (Store, ProjectionSnapshot) throws -> R) throws -> R {
        guard let store, case .ready = state else {
            throw Failure(code: .notReady, message: "the store is not open")
        }
        return try store.readCommitted { snapshot in try body(store, snapshot) }
    }
}
