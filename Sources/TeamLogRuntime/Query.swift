public import LMDB
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
    public func view(_ store: Store, _ id: Id, in txn: Transaction) throws -> JSONValue? {
        switch self {
        case .team: try store.teamView(id, in: txn)
        case .unread: try store.unreadView(id, in: txn)
        case .receipts: try store.receiptsView(id, in: txn)
        case .message: try store.messageView(id, in: txn)
        case .channel: try store.channelView(id, in: txn)
        }
    }

    /// `unread` with, per conversation, the event time of its last message as `lastTs` (0 with none): what
    /// a merge of several partitions' answers orders by, since seqs of different logs do not compare.
    public static func unreadWithTimes(_ store: Store, _ user: Id, in txn: Transaction) throws -> JSONValue {
        let plain = try store.unreadView(user, in: txn)
        guard case .object(var fields) = plain, let i = fields.firstIndex(where: { $0.0 == "conversations" }),
            case .array(let conversations) = fields[i].1
        else { return plain }
        var timed: [JSONValue] = []
        for conversation in conversations {
            guard case .object(var pairs) = conversation else { continue }
            var ts: Int64 = 0
            if let id = conversation["lastMessage"]?["messageId"]?.stringValue,
                let message = try store.messageView(Id(id), in: txn), let t = message["ts"]?.intValue
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
    /// Answers a query from the live state, blocking the calling thread: from the stored projections once
    /// they hold every op committed before the call (read your writes; the writer's thread writes one
    /// checkpoint for all queries waiting), in one read snapshot. `body` reads it; for transports whose
    /// threads may block (a NATS responder's), not for an event loop.
    public func answer<R>(_ body: (Store, Transaction) throws -> R) throws -> R {
        guard let store, case .ready = state else {
            throw Failure(code: .notReady, message: "the store is not open")
        }
        let target = committedSeq
        if let fresh: R = try store.readStoredProjections({ txn, checkpoint in
            checkpoint >= target ? try body(store, txn) : nil
        }) {
            return fresh
        }
        let slot = WaitSlot()
        whenProjections(reach: target) { outcome in
            slot.monitor.locked {
                slot.result = outcome
                slot.monitor.broadcast()
            }
        }
        let outcome = slot.monitor.locked {
            slot.monitor.wait { slot.result != nil }
            return slot.result!
        }
        try outcome.get()
        return try store.readStoredProjections { txn, _ in try body(store, txn) }
    }
}

/// One answer handed from another thread to a thread that waits for it.
private final class WaitSlot: @unchecked Sendable {
    let monitor = Monitor()
    var result: Result<Void, WriterService.Failure>?
}
